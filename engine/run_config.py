"""The configuration of a run of rounds, declared once: its fields, and the choices of mode, approval
gate, inheritance policy and harness editor that the CLI, the job arguments and the Jobs page offer.

Torch-free, so that the dashboard can read the choices without loading the ML stack; the policies and
editors that the choices name are registered in `engine.evolve` (a test keeps both lists equal)."""
from __future__ import annotations

import os
from typing import Literal, get_args

from pydantic import BaseModel, Field

from engine import ASSETS
from engine.config import load_yaml, validate
from engine.models import BackendSpec

Mode = Literal["coevo", "harness-only", "model-only", "no-inheritance"]
Gate = Literal["auto", "require"]                        # auto settles decisions; require waits for a person
Inheritance = Literal["select", "merge", "latest", "fixed"]
Editor = Literal["offline", "llm"]
AcceptEdit = Literal["always", "not_worse", "not_significantly_worse"]  # engine.evolve.acceptance

MODES: dict[str, dict] = {  # what each mode lets move: the harness (edit), the model (train), how it inherits
    "coevo": {"edit": True, "train": True, "inherit": None},
    "harness-only": {"edit": True, "train": False, "inherit": "fixed"},
    "model-only": {"edit": False, "train": True, "inherit": "latest"},
    "no-inheritance": {"edit": True, "train": True, "inherit": "latest"},
}
assert set(MODES) == set(get_args(Mode))

STEPS = ("curate", "edit", "inherit", "sample", "sft", "evaluate")  # a round's steps, in order


CHOICES = {"mode": Mode, "gate": Gate, "inheritance": Inheritance, "editor": Editor}
CHOICE_FIELDS = tuple(CHOICES)


def choices(name: str) -> list[str]:
    """The allowed values of a run setting: "mode", "gate", "inheritance" or "editor"."""
    return list(get_args(CHOICES[name]))


class SampleConfig(BaseModel):
    k: int = 4
    temperature: float = 1.0
    tasks: int = 200
    min_kept: int = 16  # fewer verified successes than this: no SFT (a few steps on a handful of rows
                        # at the profile's learning rate wreck the format more than they teach)
    max_share: float = Field(1.0, ge=0.5, le=1.0)  # the most one kind of answer (Task.answer_kind) may make of the kept rows
    replay: int = Field(0, ge=0)  # gold conversations of other train items, under the round's harness, added
                                 # to the round's SFT data: an anchor against drifting to one safe answer
    # whether sampling mends faulty calls where the harness constrains them (sampling.constrain_calls). Off, a
    # faulty sample is dropped as written: on 2 CPU cores mending added 83 s and 316 s to two rounds' sampling
    # of 384 samples at temperature 0.8 and not one kept success
    constrain: bool = False


class ProbeConfig(BaseModel):
    items: int = 24
    stage1: int = 8
    contenders: int = 2


class LlmConfig(BaseModel):
    """The OpenAI-compatible endpoint of the LLM harness editor."""
    base_url: str = Field(default_factory=lambda: os.environ.get("COEVO_LLM_BASE_URL", ""))
    model: str = Field(default_factory=lambda: os.environ.get("COEVO_LLM_MODEL", ""))
    api_key: str = Field(default_factory=lambda: os.environ.get("COEVO_LLM_API_KEY", ""), exclude=True,
                         repr=False)  # never stored in the archive
    timeout_s: float = 60.0
    temperature: float = 0.7


Executor = Literal["local", "ray"]


class ExecutorConfig(BaseModel):
    """Where a run's SFT, sampling and evaluation execute: `local` (worker processes on this machine) or
    `ray` (Ray Jobs on a cluster; the address from here or from $RAY_ADDRESS, as Ray's own tools read it).
    Remote work never opens the archive: it reads and writes files under `storage`, a POSIX path both
    sides mount (default: the archive's own folder), and the head registers what it made."""
    kind: Executor = "local"
    address: str | None = None
    sft_gpus: int = Field(0, ge=0)    # GPUs an SFT job requests (its profile's nproc_per_node by default)
    eval_gpus: int = Field(0, ge=0)   # GPUs a sampling or evaluation job requests
    merge_cpus: int = Field(1, ge=1)
    storage: str | None = None
    python: str | None = None         # the interpreter on the workers (default: this one's path)
    poll_s: float = Field(1.0, gt=0)


class RunConfig(BaseModel):
    task: str = "smart_home"
    split: str = "dev"
    mode: Mode = "coevo"
    inheritance: Inheritance = "select"  # the policy co-evolution uses
    editor: Editor = "offline"
    gate: Gate = "auto"
    seed: int = 0
    start_harness: str = "smart_home-json"
    start_checkpoint: str = "root-json"
    sample: SampleConfig = SampleConfig()
    probe: ProbeConfig = ProbeConfig()
    accept_edit: AcceptEdit = "always"  # else the round keeps the parent pair where the rule rejects the edit
    edit_alpha: float = Field(0.05, gt=0, lt=1)  # not_significantly_worse: the sign test's level
    fixed_task_options: list[str] = []  # task options every edit keeps as its parent has them
    eval_limit: int | None = None
    profile: str = "cpu"
    backend: BackendSpec = BackendSpec()  # the engine every probe, sample and evaluation of the run uses
    llm: LlmConfig = LlmConfig()
    executor: ExecutorConfig = ExecutorConfig()


def with_executor(cfg: RunConfig, kind: str | None) -> RunConfig:
    """The config with its executor's kind replaced (`--executor`); None keeps it."""
    if kind is None:
        return cfg
    return cfg.model_copy(update={"executor": validate(ExecutorConfig, {**cfg.executor.model_dump(), "kind": kind})})


def load_run_config(path=None, task: str | None = None, brain: str | None = None, **overrides) -> RunConfig:
    """A config file, or the task's default: assets/run/<task>.yaml, or with a brain its preset
    assets/run/<task>-<brain>.yaml (smart_home when no task is named). Overrides that are None keep
    the file's value; the others are validated like the file."""
    default = ASSETS / "run" / (f"{task or 'smart_home'}-{brain}.yaml" if brain else f"{task or 'smart_home'}.yaml")
    cfg = load_yaml(RunConfig, path or default)
    update = {k: v for k, v in overrides.items() if v is not None}
    if not update:
        return cfg
    data = {**cfg.model_dump(exclude={"llm"}), "llm": cfg.llm, **update}  # the API key never leaves memory
    return validate(RunConfig, data, path=path or default)
