"""The kinds of job a worker runs: a round, an evaluation, an SFT, a merge (and `sleep`, for checking the
runner). Each kind is a function `(archive, args, progress) -> result` with a pydantic model of its
arguments, validated against the archive before the job row exists, so a form gets the error at once.

This module is imported by the dashboard's process: the heavy stack (torch through engine.evolve.rounds,
the model backends, ms-swift, mergekit) is imported only inside the kind functions, in the worker.
"""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from engine.archive import Archive, ArchiveError
from engine.config import validate
from engine.errors import InputError
from engine.registry import Registry
from engine.run_config import (STEPS, Editor, Executor, ExecutorConfig, Gate, Inheritance, Mode, load_run_config,
                               with_executor)

Progress = Callable[..., None]  # progress(done, total=None, message=None)
JOB_KINDS: Registry[Callable[[Archive, dict, Progress], dict]] = Registry("job kind")


class JobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt argument is an error, not silently ignored

    def check(self, archive: Archive) -> "JobArgs":
        """The arguments with names resolved to ids; InputError naming the field if one is not in the archive."""
        return self


def kind(name: str, args_model: type[JobArgs]):
    def add(fn):
        fn.args_model = args_model
        return JOB_KINDS.register(name)(fn)
    return add


def validate_args(archive: Archive, kind_name: str, args: dict) -> dict:
    """The job's arguments, checked and completed with defaults, as stored in its row."""
    try:
        fn = JOB_KINDS.get(kind_name)
    except InputError as e:
        raise InputError(str(e), field="kind") from None
    parsed = validate(fn.args_model, args, path=f"{kind_name} job")
    return parsed.check(archive).model_dump(mode="json")


def _ref(get: Callable[[str], dict], what: str, ref: str, field: str) -> str:
    try:
        return get(ref)["id"]
    except ArchiveError:
        raise InputError(f"no {what} {ref!r} in the archive", field=field) from None


def _has_weights(archive: Archive, cid: str, field: str) -> None:
    c = archive.checkpoint(cid)
    if c["kind"] == "endpoint":
        raise InputError(f"{cid} is a served model ({c['path']}): no weights to train or merge", field=field)


def _claim_name(archive: Archive, stem: str) -> str:
    """A checkpoint name that no row and no directory uses yet, claimed by creating its `.partial` work
    directory (atomically), so that two jobs never train into, or delete, the same directory."""
    root = archive.files_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        name = stem if n == 1 else f"{stem}-{n}"
        if archive.find_checkpoint(name) or (root / name).exists():
            continue
        try:
            (root / f"{name}.partial").mkdir()
        except FileExistsError:
            continue
        return name


# -- round ----------------------------------------------------------------------------------------
class RoundArgs(JobArgs):
    rounds: int = Field(1, ge=1)
    executor: Executor | None = None  # local or ray (the cluster at $RAY_ADDRESS); None: the run config's
    # the choices of `coevo run`; None keeps the run config's value
    mode: Mode | None = None
    gate: Gate | None = None
    inheritance: Inheritance | None = None
    editor: Editor | None = None
    seed: int | None = None
    task: str | None = None        # picks the default round config assets/run/<task>.yaml
    run_config: str | None = None  # round config YAML (default assets/run/<task>.yaml)

    def check(self, archive):
        if self.run_config is None:
            return self
        path = Path(self.run_config).resolve()  # the worker may run elsewhere
        if not path.is_file():
            raise InputError("file not found", path=path, field="run_config")
        return self.model_copy(update={"run_config": str(path)})


@kind("round", RoundArgs)
def run_rounds(archive: Archive, args: dict, progress: Progress) -> dict:
    """N more rounds of co-evolution; a decision pending a person's approval ends the job early."""
    from engine.evolve.rounds import RoundRunner, Waiting
    a = RoundArgs(**args)
    cfg = with_executor(load_run_config(a.run_config, task=a.task, mode=a.mode, gate=a.gate,
                                        inheritance=a.inheritance, editor=a.editor, seed=a.seed), a.executor)
    total, steps_done = len(STEPS) * a.rounds, 0

    def on_step(rid: int, step: str) -> None:
        nonlocal steps_done
        steps_done += 1
        following = STEPS.index(step) + 1
        progress(steps_done, total, f"round {rid}: {STEPS[following]}" if following < len(STEPS)
                 else f"round {rid} done")

    target = len([r for r in archive.rounds() if r["state"] == "done"]) + a.rounds
    progress(0, total, f"round: {STEPS[0]}")
    def on_pause(act: dict | None) -> None:
        progress(steps_done, total, f"paused by {act['decided_by']}: waiting for a resume" if act else "resumed")
        getattr(progress, "flush", lambda: None)()  # the reporter throttles; a pause may last long

    runner = RoundRunner(archive, cfg, log=lambda m: print(m, flush=True), on_step=on_step, on_pause=on_pause)
    try:
        summary = runner.run(target)
    except Waiting as w:
        print(w, flush=True)
        return {"waiting": w.decision_id}
    return {"rounds": summary[-a.rounds:]}


# -- eval -----------------------------------------------------------------------------------------
def _executor(archive: Archive, kind: str | None):
    """A job's executor: None (this machine) unless it names `ray`."""
    from engine.executors import get_executor
    return get_executor(ExecutorConfig(kind=kind or "local"), archive.files_dir)


class EvalArgs(JobArgs):
    executor: Executor | None = None
    harness: str
    checkpoint: str
    task: str = "smart_home"
    split: str = "dev"
    limit: int | None = Field(None, ge=1)

    def check(self, archive):
        from engine.evaluate import task_dir  # cheap: it loads models lazily
        from engine.tasks import get_task
        harness = _ref(archive.harness, "harness", self.harness, "harness")
        checkpoint = _ref(archive.checkpoint, "checkpoint", self.checkpoint, "checkpoint")
        try:
            task = get_task(self.task, task_dir(archive, self.task))
        except InputError as e:
            raise InputError(str(e), field="task") from None
        try:
            task.split_path(self.split)
        except InputError as e:
            raise InputError(str(e), field="split") from None
        return self.model_copy(update={"harness": harness, "checkpoint": checkpoint})


@kind("eval", EvalArgs)
def run_eval(archive: Archive, args: dict, progress: Progress) -> dict:
    from engine.evaluate import evaluate
    a = EvalArgs(**args)
    progress(0, None, f"loading {a.checkpoint}")
    r = evaluate(archive, a.harness, a.checkpoint, a.task, a.split, limit=a.limit, executor=_executor(archive, a.executor),
                 progress=lambda done, n: progress(done, n, f"{done}/{n} episodes"))
    return {"evaluation": r["id"], "score": r["score"], "timr": r["timr"]}


# -- sft ------------------------------------------------------------------------------------------
class SftArgs(JobArgs):
    executor: Executor | None = None
    checkpoint: str              # the checkpoint to start from
    harness: str                 # the harness the data set is rendered under
    dataset: str                 # a data set id, source 'rejection' or 'gold'
    profile: str | None = None   # a training profile name or YAML path (default: the run config's)
    seed: int = 0

    def check(self, archive):
        checkpoint = _ref(archive.checkpoint, "checkpoint", self.checkpoint, "checkpoint")
        _has_weights(archive, checkpoint, "checkpoint")
        harness = _ref(archive.harness, "harness", self.harness, "harness")
        try:
            source = archive.dataset(self.dataset)["source"]
        except ArchiveError:
            raise InputError(f"no data set {self.dataset!r} in the archive", field="dataset") from None
        if source not in ("rejection", "gold"):
            raise InputError(f"data set {self.dataset} is {source!r}, not 'rejection' or 'gold'", field="dataset")
        profile = self.profile
        if profile is not None:
            from engine.train.sft import load_profile  # cheap: ms-swift runs in its own process
            try:
                load_profile(profile)
            except InputError as e:
                raise InputError(str(e), field="profile") from None
            if Path(profile).suffix:  # a YAML path, not a profile name: the worker may run elsewhere
                profile = str(Path(profile).resolve())
        return self.model_copy(update={"harness": harness, "checkpoint": checkpoint, "profile": profile})


@kind("sft", SftArgs)
def run_sft_job(archive: Archive, args: dict, progress: Progress) -> dict:
    from engine.checkpoints import SftRequest, register, train
    a = SftArgs(**args)
    profile = a.profile or load_run_config().profile
    name = _claim_name(archive, f"sft-{a.checkpoint}-{a.dataset}")
    progress(0, 1, f"training {name} (profile {profile}; ms-swift logs to its train.log)")
    (built,) = train(archive, [SftRequest(a.checkpoint, a.dataset, name, profile, a.seed, harness=a.harness)],
                     executor=_executor(archive, a.executor))
    cid = register(archive, built)
    progress(1, 1, f"registered {cid} {name}")
    return {"checkpoint": cid}


# -- merge ----------------------------------------------------------------------------------------
class MergeArgs(JobArgs):
    executor: Executor | None = None
    models: list[str] = Field(min_length=2)
    base: str | None = None  # default: the models' lowest common ancestor
    density: float = Field(0.5, gt=0, le=1)

    def check(self, archive):
        from engine.archive.lineage import lowest_common_ancestor
        models = [_ref(archive.checkpoint, "checkpoint", m, f"models.{i}") for i, m in enumerate(self.models)]
        for i, m in enumerate(models):
            _has_weights(archive, m, f"models.{i}")
        if len(set(models)) < len(models):
            raise InputError("a checkpoint is given twice", field="models")
        if self.base is not None:
            base = _ref(archive.checkpoint, "checkpoint", self.base, "base")
        else:
            base = lowest_common_ancestor(archive.checkpoint_lineage(), models)
            if base is None:
                raise InputError("the models have no common ancestor: give a base", field="base")
        if base in models:  # TIES takes task vectors relative to the base: the base's own is zero
            raise InputError(f"the base {base} is one of the merged models", field="base")
        return self.model_copy(update={"models": models, "base": base})


@kind("merge", MergeArgs)
def run_merge_job(archive: Archive, args: dict, progress: Progress) -> dict:
    """A TIES merge registered as the `merge` inheritance policy registers one."""
    from engine.checkpoints import merge, register
    a = MergeArgs(**args)
    name = _claim_name(archive, f"merge-{'-'.join(a.models)}")
    progress(0, 1, f"merging into {name}")
    cid = register(archive, merge(archive, a.models, a.base, name, density=a.density,
                                  executor=_executor(archive, a.executor)))
    progress(1, 1, f"registered {cid} {name}")
    return {"checkpoint": cid}


# -- matrix ---------------------------------------------------------------------------------------
class MatrixArgs(JobArgs):
    task: str = "smart_home"
    split: str = "dev"
    top: int = Field(4, ge=1, le=100)


@kind("matrix", MatrixArgs)
def run_matrix(archive: Archive, args: dict, progress: Progress) -> dict:
    """`coevo matrix --fill`: every pair of the top harnesses x top checkpoints evaluated in full."""
    from engine.matrix import fill, fill_settings
    a = MatrixArgs(**args)
    backend, limit = fill_settings(archive, a.task)
    progress(0, None, f"choosing the top {a.top} of {a.task}/{a.split}")
    result = fill(archive, a.task, a.split, a.top, limit=limit, backend_spec=backend,
                  log=lambda m: print(m, flush=True), progress=lambda done, n: progress(done, n, f"{done}/{n} pairs"))
    return {"evaluated": len(result["evaluated"]), "skipped": result["skipped"],
            "harnesses": result["harnesses"], "checkpoints": result["checkpoints"]}


# -- sleep ----------------------------------------------------------------------------------------
class SleepArgs(JobArgs):
    seconds: float = Field(5.0, gt=0, le=3600)
    steps: int = Field(5, ge=1, le=1000)


@kind("sleep", SleepArgs)
def run_sleep(archive: Archive, args: dict, progress: Progress) -> dict:
    """Waits, reporting progress after each step: checks the runner (progress, log, cancel) without a model.
    Like an SFT job it waits in child processes, so a cancel must take the whole process group down."""
    a = SleepArgs(**args)
    for i in range(a.steps):
        subprocess.run([sys.executable, "-c", f"import time; time.sleep({a.seconds / a.steps})"], check=True)
        print(f"step {i + 1}/{a.steps}", flush=True)
        progress(i + 1, a.steps, f"slept {i + 1}/{a.steps} steps")
    return {"seconds": a.seconds}
