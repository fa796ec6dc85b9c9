"""Checkpoints the archive did not have: engine.train builds a model directory (SFT with ms-swift, a
TIES merge with mergekit) and `register` records it with its parents, harness, data set and recipe.
Every caller (init's roots, a round's SFT step, the SFT and merge jobs, the merge policy) goes through
these, so a checkpoint is described the same way wherever it was made."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.archive import Archive
from engine.errors import CoevoError
from engine.train.merge import run_ties, ties_config
from engine.train.sft import SftJob, finish_sft, load_profile, start_sft


@dataclass
class Built:
    """A model directory that engine.train made, with what the archive records about it."""
    name: str
    path: Path
    kind: str                                # sft | merge
    parents: list[tuple[str, str]]           # (checkpoint id, role: init | model | base)
    recipe: dict
    harness_id: str | None = None            # trained under this harness
    dataset_id: str | None = None            # on this data set


@dataclass
class SftRequest:
    """Fine-tune checkpoint `parent` on the archive's data set `dataset` into checkpoints/NAME."""
    parent: str
    dataset: str
    name: str
    profile: str  # a profile name or YAML path
    seed: int = 0
    harness: str | None = None

    def job(self, archive: Archive, root: Path | None = None) -> SftJob:
        """The ms-swift job; `root` is where checkpoints go (a remote executor's storage root)."""
        return SftJob(model_dir=weights(archive, self.parent), dataset=archive.dataset(self.dataset)["path"],
                      output_dir=str((root or archive.files_dir) / "checkpoints" / self.name),
                      profile=load_profile(self.profile), seed=self.seed)


def weights(archive: Archive, checkpoint: str) -> str:
    """A checkpoint's model directory; a served model (an endpoint) has none to train or merge."""
    c = archive.checkpoint(checkpoint)
    if c["kind"] == "endpoint":
        raise CoevoError(f"checkpoint {c['id']} ({c['name']}) is a served model at {c['path']}: it has no weights "
                         "to fine-tune or merge")
    return c["path"]


def register_endpoint(archive: Archive, name: str, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                      **options) -> str:
    """A model behind an OpenAI-compatible API as a checkpoint of kind `endpoint` (once per name): a
    baseline in the matrix and the lineage. The key's variable name is kept, never the key."""
    found = archive.find_checkpoint(name)
    if found:
        c = archive.checkpoint(found)
        if c["kind"] != "endpoint" or (c["path"], c["recipe"].get("model")) != (base_url, model):
            raise CoevoError(f"checkpoint {name!r} exists as {c['kind']} at {c['path']}: pick another name")
        return found
    return archive.add_checkpoint(name=name, path=base_url, kind="endpoint",
                                  recipe={"base_url": base_url, "model": model, "api_key_env": api_key_env, **options})


def train(archive: Archive, requests: list[SftRequest], *, executor=None, log=print) -> list[Built]:
    """Run the SFTs (one ms-swift worker process each), as many at once as the cores allow: a worker
    with fewer cores than its profile's threads runs many times slower; or, with a remote executor, one
    remote job each (a GPU profile's job requests the executor's sft_gpus, else its nproc_per_node). What
    they built, in order."""
    if executor is not None:
        return [_train_remote(archive, r, executor, log) for r in requests]
    jobs = [r.job(archive) for r in requests]
    cores = os.cpu_count() or 1
    width = max(1, cores // max(1, min((j.profile.threads or cores) for j in jobs))) if jobs else 1
    built = []
    for start in range(0, len(jobs), width):
        batch = list(zip(requests[start:start + width], jobs[start:start + width]))
        running = [start_sft(j) for _, j in batch]
        built += [Built(r.name, finish_sft(j, proc), "sft", [(r.parent, "init")],
                        {"profile": j.profile.model_dump(), "seed": r.seed}, r.harness, r.dataset)
                  for (r, j), proc in zip(batch, running)]
    return built


def _train_remote(archive: Archive, r: SftRequest, executor, log) -> Built:
    from engine.executors import step_key
    j = r.job(archive, executor.root)
    # a GPU profile names its processes per node (one per GPU; the executor's sft_gpus, when set, decides)
    gpus = 0 if j.profile.use_cpu or not j.profile.nproc_per_node else (executor.cfg.sft_gpus or j.profile.nproc_per_node)
    if gpus:
        j = j.model_copy(update={"profile": j.profile.model_copy(update={"nproc_per_node": gpus})})
    out = executor.run({"kind": "sft", "sft": j.model_dump(mode="json")}, key=step_key(archive.path, "sft", r.name),
                       gpus=gpus, log=log)
    path = _checked(Path(out["path"]), j.output_dir)
    return Built(r.name, path, "sft", [(r.parent, "init")], {"profile": j.profile.model_dump(), "seed": r.seed,
                                                              "executor": executor.kind}, r.harness, r.dataset)


def _checked(path: Path, expected: str) -> Path:
    """A remote job's model directory, where it was asked to be and complete."""
    if path.resolve() != Path(expected).resolve() or not (path / "config.json").exists():
        raise CoevoError(f"the remote job returned {path}, expected a complete model directory at {expected}")
    return path


def merge(archive: Archive, models: list[str], base: str, name: str, *, density: float = 0.5, executor=None,
          log=print) -> Built:
    """TIES-merge archive checkpoints over `base` into checkpoints/NAME (on a CPU worker when remote)."""
    recipe = ties_config([weights(archive, c) for c in models], weights(archive, base), density=density)
    if executor is not None:
        from engine.executors import step_key
        target = executor.root / "checkpoints" / name
        res = executor.run({"kind": "merge", "recipe": recipe, "out": str(target)},
                           key=step_key(archive.path, "merge", name), cpus=executor.cfg.merge_cpus, log=log)
        out = _checked(Path(res["path"]), str(target))
    else:
        out = run_ties(recipe, archive.files_dir / "checkpoints" / name)
    return Built(name, out, "merge", [(c, "model") for c in models] + [(base, "base")],
                 {"mergekit": recipe, "base": base})


def register(archive: Archive, built: Built, *, round: int | None = None) -> str:
    """Record a built checkpoint; its id."""
    return archive.add_checkpoint(name=built.name, path=built.path, kind=built.kind, parents=built.parents,
                                  harness_id=built.harness_id, dataset_id=built.dataset_id, round=round,
                                  recipe=built.recipe)
