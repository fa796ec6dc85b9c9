"""`coevo init`: the task data, the seed harnesses, and the brain: the embedded default built offline
(tokenizer, random-init tiny Qwen3) or a pretrained brain shipped in a registry package (GGUF, imported
once), each given root checkpoints fine-tuned with ms-swift on gold conversations under different
interfaces; or a local model (a Hugging Face directory or a .gguf file) registered as it is.
Every step is skipped when already done."""
from __future__ import annotations

import inspect
import os
import shutil
from functools import cached_property
from pathlib import Path
from typing import Callable

from pydantic import BaseModel

from engine import ASSETS
from engine.archive import Archive
from engine.checkpoints import SftRequest, register, train
from engine.config import load_yaml
from engine.errors import InputError
from engine.evaluate import task_dir
from engine.harness.spec import HarnessSpec
from engine.jsonl import write_jsonl
from engine.models.gguf import BRAINS, import_gguf, provenance
from engine.models.tiny import TinyModelConfig, build_model, generic_corpus, train_tokenizer
from engine.tasks import get_task
from engine.train.data import gold_conversations

TOKENIZER_ITEMS = 300  # train items whose gold conversations (per seed harness) teach the tiny tokenizer


class RootSpec(BaseModel):
    name: str
    harness: str  # a seed harness name


class InitConfig(BaseModel):
    task: str = "smart_home"
    brain: str | None = None      # a registered pretrained brain (smollm2-135m); None: the tiny model
    base_name: str = "tiny-base"  # the base checkpoint's name (the tiny model: one per task's vocabulary)
    root_items: int | None = None  # gold conversations each root is fine-tuned on (None: the train split)
    seed: int = 0
    sizes: dict[str, int] = {"train": 1000, "dev": 60, "test": 200}
    harnesses: list[str] = ["smart_home_json", "smart_home_xml", "smart_home_tool_call"]
    model: TinyModelConfig = TinyModelConfig()
    roots: list[RootSpec] = [RootSpec(name="root-json", harness="smart_home-json"),
                             RootSpec(name="root-xml", harness="smart_home-xml")]
    profile: str = "cpu"
    # the task generator's options (smart_home: `homes`, a HomeBench homes file to draw the instructions over)
    data: dict = {}
    # task options set on every seed harness (smart_home: `rooms: mentioned` shows only the rooms named)
    seed_task_options: dict = {}
    # sampling settings set on every seed harness (`constrain_calls: true` keeps calls to the task's tools)
    seed_sampling: dict = {}


def load_init_config(path=None, task: str | None = None, brain: str | None = None) -> InitConfig:
    """A config file, or the task's default: assets/init/<task>.yaml, or with a brain its preset
    assets/init/<task>-<brain>.yaml (smart_home when no task is named)."""
    if path is None and brain is not None:
        BRAINS.get(brain)
        path = ASSETS / "init" / f"{task or 'smart_home'}-{brain}.yaml"
        if not path.exists():
            raise InputError(f"no preset for brain {brain!r} on task {task or 'smart_home'!r}", path=path)
    config = load_yaml(InitConfig, path or ASSETS / "init" / f"{task or 'smart_home'}.yaml")
    if brain is not None and config.brain != brain:
        raise InputError(f"the config is for brain {config.brain!r}, not {brain!r}", path=path, field="brain")
    return config


def register_base_model(archive: Archive, source, log) -> str:
    """A local Hugging Face directory, or a .gguf file imported beside the archive's checkpoints."""
    path = Path(source).resolve()
    if path.suffix == ".gguf":
        name = path.stem
        if not archive.find_checkpoint(name):
            log(f"importing {path.name}")
            out = import_gguf(str(path), archive.files_dir / "checkpoints" / name)
            archive.add_checkpoint(name=name, path=out, kind="base", recipe={"source": str(path), **provenance(out)})
        return name
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: not a Hugging Face model directory (no config.json)")
    if not archive.find_checkpoint(path.name):
        archive.add_checkpoint(name=path.name, path=path, kind="base", recipe={"source": str(path)})
    return path.name


INIT_STEPS = ("data", "harnesses", "base", "roots")


class Init:
    """`coevo init` as named steps, each skipped when the archive shows it done, so a killed init resumes:
    the task data, the seed harnesses, the base model, the roots."""

    def __init__(self, archive: Archive, config: InitConfig, log: Callable[[str], None] = print):
        self.archive, self.config, self.log = archive, config, log
        self.task = get_task(config.task, task_dir(archive, config.task))
        self.specs: dict[str, tuple[str, HarnessSpec]] = {}  # seed harness name -> (id, spec)
        self._gold: dict[str, list[dict]] = {}

    def run(self, base_model=None) -> dict:
        # a local model is registered as it is: it gets no roots
        for step in INIT_STEPS if base_model is None else INIT_STEPS[:2]:
            getattr(self, step)()
        if base_model is not None:
            name = register_base_model(self.archive, base_model, self.log)
            self.log(f"base model {name}: {self.archive.checkpoint(name)['id']}")
        return {"harnesses": {n: h for n, (h, _) in self.specs.items()},
                "checkpoints": {c["name"]: c["id"] for c in self.archive.checkpoints()}}

    def data(self) -> None:
        if not all(self.task.has_split(s) for s in self.config.sizes):
            c = self.config
            generate = type(self.task).generate
            accepted = set(inspect.signature(generate).parameters) - {"out_dir", "seed", "sizes", "options"}
            for key in c.data:
                if key not in accepted:
                    raise InputError(f"the {c.task} data generator takes no option {key!r} "
                                     f"(it takes: {', '.join(sorted(accepted)) or 'none'})", field=f"data.{key}")
            self.log(f"generating {c.task} data {c.sizes} (seed {c.seed}) in {self.task.data_dir}")
            generate(self.task.data_dir, seed=c.seed, sizes=c.sizes, **c.data)

    def harnesses(self) -> None:
        for name in self.config.harnesses:  # add_harness returns the stored id of a spec it already holds
            spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
            if self.config.seed_task_options or self.config.seed_sampling:
                spec = HarnessSpec.from_dict({
                    **spec.to_dict(), "task_options": {**spec.task_options, **self.config.seed_task_options},
                    "sampling": {**spec.sampling.model_dump(), **self.config.seed_sampling}},
                    source=f"init config seed_sampling / seed_task_options on {name}")
            self.specs[spec.name] = (self.archive.add_harness(spec.to_dict(), creator="seed",
                                                              rationale="seed harness"), spec)

    def base(self) -> None:
        c = self.config
        if self.archive.find_checkpoint(c.base_name):
            return
        out = self.archive.files_dir / "checkpoints" / c.base_name
        if c.brain is not None:
            self.log(f"importing brain {c.brain}")
            import_gguf(c.brain, out)
            self.archive.add_checkpoint(name=c.base_name, path=out, kind="base", recipe=provenance(out))
            return
        self.log("training the tokenizer and building the tiny base model")
        texts = generic_corpus()
        for name in self.specs:
            texts += [m["content"] for row in self.gold(name)[:TOKENIZER_ITEMS] for m in row["messages"]]
        tmp = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        build_model(train_tokenizer(texts, tmp, c.model.vocab_size), tmp, c.model)
        os.replace(tmp, out)
        self.archive.add_checkpoint(name=c.base_name, path=out, kind="base",
                                    recipe={"tiny": c.model.model_dump(), "task": c.task})

    def roots(self) -> None:
        """Fine-tune the base on gold conversations under each root's harness (as many at once as the cores allow)."""
        c = self.config
        base = self.archive.checkpoint(c.base_name)["id"]
        requests = []
        for root in c.roots:
            if self.archive.find_checkpoint(root.name):
                continue
            harness_id, _ = self.specs[root.harness]
            rows = self.gold(root.harness)[:c.root_items]
            path = self.archive.files_dir / "data" / f"{root.name}-gold.jsonl"
            dataset = self.archive.find_dataset(path)
            if dataset is None:
                write_jsonl(path, rows)
                dataset = self.archive.add_dataset(path=path, task=c.task, source="gold", harness_id=harness_id,
                                                   tasks_tried=len(rows), samples=len(rows), kept=len(rows),
                                                   meta={"split": "train"})
            self.log(f"fine-tuning {root.name} under {root.harness} with ms-swift ({len(rows)} conversations)")
            requests.append(SftRequest(base, dataset, root.name, c.profile, c.seed, harness=harness_id))
        for built in train(self.archive, requests):
            self.log(f"registered {built.name} as {register(self.archive, built)}")

    def gold(self, harness: str) -> list[dict]:
        """The train split's gold conversations under a seed harness, built once."""
        if harness not in self._gold:
            self._gold[harness] = gold_conversations(self.specs[harness][1], self.task, self.train_items)
        return self._gold[harness]

    @cached_property
    def train_items(self):
        n = self.config.root_items
        return self.task.load("train", limit=max(n, TOKENIZER_ITEMS) if n else None)


def init(archive: Archive, config: InitConfig, *, base_model=None, log: Callable[[str], None] = print) -> dict:
    return Init(archive, config, log).run(base_model)
