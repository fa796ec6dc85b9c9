"""`coevo init`: the task data, the seed harnesses, and the brain: the embedded default built offline
(tokenizer, random-init tiny Qwen3) or a pretrained brain shipped in a registry package (GGUF, imported
once), each given root checkpoints fine-tuned with ms-swift on gold conversations under different
interfaces; or a local model (a Hugging Face directory or a .gguf file) registered as it is.
Every step is skipped when already done."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from pydantic import BaseModel

from engine import ASSETS
from engine.archive import Archive
from engine.config import load_yaml
from engine.errors import InputError
from engine.evaluate import task_dir
from engine.harness.spec import HarnessSpec
from engine.jsonl import write_jsonl
from engine.models.gguf import BRAINS, import_gguf, provenance
from engine.models.tiny import TinyModelConfig, build_model, generic_corpus, train_tokenizer
from engine.tasks import get_task
from engine.train.data import gold_conversations
from engine.train.sft import SftJob, finish_sft, load_profile, start_sft

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


def register_base_model(archive: Archive, source, existing: dict, log) -> str:
    """A local Hugging Face directory, or a .gguf file imported beside the archive's checkpoints."""
    path = Path(source).resolve()
    if path.suffix == ".gguf":
        name = path.stem
        if name not in existing:
            log(f"importing {path.name}")
            out = import_gguf(str(path), archive.files_dir / "checkpoints" / name)
            existing[name] = archive.add_checkpoint(name=name, path=out, kind="base",
                                                    recipe={"source": str(path), **provenance(out)})
        return name
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: not a Hugging Face model directory (no config.json)")
    name = path.name
    if name not in existing:
        existing[name] = archive.add_checkpoint(name=name, path=path, kind="base", recipe={"source": str(path)})
    return name


def init(archive: Archive, config: InitConfig, *, base_model=None, log: Callable[[str], None] = print) -> dict:
    data = task_dir(archive, config.task)
    task = get_task(config.task, data)
    if not all(task.has_split(s) for s in config.sizes):
        log(f"generating {config.task} data {config.sizes} (seed {config.seed}) in {data}")
        type(task).generate(data, seed=config.seed, sizes=config.sizes)

    specs = {}
    for name in config.harnesses:
        spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
        specs[spec.name] = (archive.add_harness(spec.to_dict(), creator="seed", rationale="seed harness"), spec)

    existing = {c["name"]: c["id"] for c in archive.checkpoints()}
    if base_model is not None:
        name = register_base_model(archive, base_model, existing, log)
        log(f"base model {name}: {existing[name]}")
        return {"harnesses": {n: h for n, (h, _) in specs.items()}, "checkpoints": existing}

    ckpt_dir = archive.files_dir / "checkpoints"
    if config.brain is not None and config.base_name not in existing:
        log(f"importing brain {config.brain}")
        out = import_gguf(config.brain, ckpt_dir / config.base_name)
        existing[config.base_name] = archive.add_checkpoint(name=config.base_name, path=out, kind="base",
                                                            recipe=provenance(out))
    elif config.base_name not in existing:
        log("training the tokenizer and building the tiny base model")
        texts = generic_corpus()
        train = task.load("train")
        for _, spec in specs.values():
            texts += [m["content"] for row in gold_conversations(spec, task, train[:300]) for m in row["messages"]]
        tmp = ckpt_dir / f"{config.base_name}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tok = train_tokenizer(texts, tmp, config.model.vocab_size)
        build_model(tok, tmp, config.model)
        os.replace(tmp, ckpt_dir / config.base_name)
        existing[config.base_name] = archive.add_checkpoint(
            name=config.base_name, path=ckpt_dir / config.base_name, kind="base",
            recipe={"tiny": config.model.model_dump(), "task": config.task})
    base = archive.checkpoint(existing[config.base_name])

    profile = load_profile(config.profile)
    pending = [r for r in config.roots if r.name not in existing]
    running = []
    # as many roots at once as the cores allow: a worker oversubscribed with threads runs many times slower
    width = max(1, (os.cpu_count() or 1) // (profile.threads or os.cpu_count() or 1))
    for root in pending:
        harness_id, spec = specs[root.harness]
        path = archive.files_dir / "data" / f"{root.name}-gold.jsonl"
        rows = gold_conversations(spec, task, task.load("train")[:config.root_items])
        write_jsonl(path, rows)
        dataset = archive.find_dataset(path) or archive.add_dataset(
            path=path, task=config.task, source="gold", harness_id=harness_id, tasks_tried=len(rows),
            samples=len(rows), kept=len(rows), meta={"split": "train"})
        job = SftJob(model_dir=base["path"], dataset=str(path), output_dir=str(ckpt_dir / root.name),
                     profile=profile, seed=config.seed)
        shutil.rmtree(job.output_dir, ignore_errors=True)  # unregistered, so never finished
        log(f"fine-tuning {root.name} under {root.harness} with ms-swift ({len(rows)} conversations)")
        running.append((root, harness_id, dataset, job))
    for start in range(0, len(running), width):
        batch = [(*r, start_sft(r[3])) for r in running[start:start + width]]
        for root, harness_id, dataset, job, proc in batch:
            path = finish_sft(job, proc)
            existing[root.name] = archive.add_checkpoint(
                name=root.name, path=path, kind="sft", parents=[(base["id"], "init")], harness_id=harness_id,
                dataset_id=dataset, recipe={"profile": profile.model_dump(), "seed": config.seed})
            log(f"registered {root.name} as {existing[root.name]}")
    return {"harnesses": {n: h for n, (h, _) in specs.items()}, "checkpoints": existing}
