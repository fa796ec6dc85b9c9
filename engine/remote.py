"""What a remote worker runs: one task, a pure function of its job file. It never opens the archive: it
reads the files the job names (a model directory, a task's data, a data set) and writes its outputs
beside the job file, under the storage root both sides mount; the head validates and registers them.

    python -m engine.remote JOB.json        # writes JOB.result.json when done

Kinds: `sft` (data set -> checkpoint directory), `merge` (mergekit recipe -> checkpoint directory),
`rollouts` (harness, checkpoint, items -> episode and turn rows as JSONL) and `sample` (rejection
sampling -> a data set)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from engine.jsonl import write_jsonl
from engine.registry import Registry

TASKS: Registry = Registry("remote task")


def result_path(job_file: Path) -> Path:
    return job_file.with_name(job_file.stem + ".result.json")


@TASKS.register("sft")
def sft(job: dict, folder: Path) -> dict:
    from engine.train.sft import SftJob, run_sft
    return {"path": str(run_sft(SftJob.model_validate(job["sft"])))}


@TASKS.register("merge")
def merge(job: dict, folder: Path) -> dict:
    from engine.train.merge import run_ties
    return {"path": str(run_ties(job["recipe"], job["out"]))}


def _setup(job: dict):
    """The harness spec, the task, its items and the model backend a rollout job names."""
    from engine.harness.spec import HarnessSpec
    from engine.models import BackendSpec, load_backend
    from engine.tasks import get_task
    spec = HarnessSpec.from_dict(job["spec"])
    task = get_task(job["task"], job["data_dir"])
    items = task.load(job["split"], job.get("limit"))
    if job.get("item_ids") is not None:
        by_id = {it.id: it for it in items}
        items = [by_id[i] for i in job["item_ids"]]
    backend = load_backend(gpu_backend(BackendSpec.model_validate(job["backend"])), job["checkpoint"])
    backend.seed = job.get("seed", 0)
    return spec, task, items, backend


def gpu_backend(spec):
    """On a GPU node with vLLM installed, a transformers rollout runs on vLLM's offline engine."""
    if spec.name != "transformers":
        return spec
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return spec
    return spec.model_copy(update={"name": "vllm", "dtype": None}) if torch.cuda.is_available() else spec


@TASKS.register("rollouts")
def rollouts(job: dict, folder: Path) -> dict:
    from engine.rollout import episode_rows, run_episodes, summarize, timed
    spec, task, items, backend = _setup(job)
    episodes, seconds = timed(run_episodes, spec, task, backend, items, k=job.get("k", 1),
                              temperature=job.get("temperature"))
    ep_rows, turn_rows = episode_rows(episodes)
    write_jsonl(folder / "episodes.jsonl", ep_rows)
    write_jsonl(folder / "turns.jsonl", turn_rows)
    return {"episodes": str(folder / "episodes.jsonl"), "turns": str(folder / "turns.jsonl"), "seconds": seconds,
            "stats": summarize(episodes), "backend": backend.label}


@TASKS.register("sample")
def sample(job: dict, folder: Path) -> dict:
    from engine.evolve.sampling import rejection_sample
    spec, task, items, backend = _setup(job)
    counts = rejection_sample(spec, task, backend, items, k=job["k"], temperature=job["temperature"],
                              out_path=job["out"], max_share=job.get("max_share", 1.0),
                              constrain=job.get("constrain", False))
    return {**counts, "backend": backend.label}


def execute(job: dict, job_file: Path) -> dict:
    folder = job_file.with_name(job_file.stem)
    folder.mkdir(parents=True, exist_ok=True)
    return TASKS.get(job["kind"])(job, folder)


def main(path: str) -> None:
    job_file = Path(path)
    result = execute(json.loads(job_file.read_text()), job_file)
    out = result_path(job_file)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)  # the result appears complete or not at all
    print(f"done: {out}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
