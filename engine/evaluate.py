"""Evaluate a (harness, checkpoint) pair on a task split and store the evaluation with every turn."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from engine.archive import Archive
from engine.errors import CoevoError
from engine.harness.spec import HarnessSpec
from engine.jsonl import read_jsonl
from engine.models import BackendSpec, endpoint_spec, load_backend
from engine.rollout import episode_rows, run_episodes, summarize, timed
from engine.tasks import get_task


def task_dir(archive: Archive, task: str) -> Path:
    """Where the archive keeps a task's data (the generated default, unless --data says otherwise)."""
    return archive.files_dir / "tasks" / task


def evaluate(archive: Archive, harness: str, checkpoint: str, task: str = "smart_home", split: str = "dev",
             **kw) -> dict:
    """Run and store one evaluation (one transaction, after all episodes are done)."""
    record, ep_rows, turn_rows = run_evaluation(archive, harness, checkpoint, task, split, **kw)
    record["id"] = archive.add_evaluation(record, ep_rows, turn_rows)
    return record


def evaluate_seed_matrix(archive: Archive, task: str, split: str, *, limit=None, include_base=False,
                         backend_spec: BackendSpec | None = None, log: Callable[[str], None] = lambda m: None) -> None:
    """The starting matrix: every seed harness of the task under every checkpoint trained outside the
    rounds (the roots; the base too with `include_base`) that has no evaluation yet. Rounds evaluate
    their own pairs and merges are made of other checkpoints, so a resumed run adds nothing here.
    Each checkpoint is loaded once."""
    done = {(r["harness"], r["checkpoint"]) for r in archive.matrix(task, split)}
    harnesses = [h for h in archive.harnesses(task) if h["creator"] == "seed"]
    tasks = archive.checkpoint_tasks()
    for c in archive.checkpoints():
        if ((c["kind"] == "base" and not include_base) or c["kind"] in ("endpoint", "merge")
                or tasks[c["id"]] not in (task, None)
                or c["round"] is not None):
            continue
        todo = [h for h in harnesses if (h["id"], c["id"]) not in done]
        backend = load_backend(backend_spec or BackendSpec(), c["path"]) if todo else None
        for h in todo:
            r = evaluate(archive, h["id"], c["id"], task, split, limit=limit, backend=backend, backend_spec=backend_spec)
            log(f"  {h['name']:<24} x {c['name']:<12} score {r['score']:.3f}  TIMR {r['timr']:6.1%}")


def run_evaluation(archive: Archive, harness: str, checkpoint: str, task: str = "smart_home", split: str = "dev", *,
                   data_dir=None, limit: int | None = None, backend=None, backend_spec: BackendSpec | None = None,
                   round: int | None = None, progress: Callable[[int, int], None] | None = None,
                   items=None, executor=None) -> tuple[dict, list[dict], list[dict]]:
    """The evaluation record with its episode and turn rows, not yet stored. `items` (already loaded from
    `split`, say a stratified subset) replaces loading the split."""
    h = archive.harness(harness)
    c = archive.checkpoint(checkpoint)
    spec = HarnessSpec.from_dict(h["spec"], source=f"harness {h['id']}")
    t = get_task(task, data_dir or task_dir(archive, task))
    items = items if items is not None else t.load(split, limit)
    if c["kind"] == "endpoint":  # a served model: its own backend, whatever the run's is
        backend_spec = endpoint_spec(c)
    backend_spec = backend_spec or BackendSpec(name=getattr(backend, "name", "transformers"),
                                               compute_type=getattr(backend, "compute_type", None))
    if executor is not None and c["kind"] != "endpoint":  # the rollouts on a remote worker, as rows
        from engine.executors import rollout_job, step_key
        job = rollout_job("rollouts", spec=h["spec"], task=task, data_dir=data_dir or task_dir(archive, task),
                          split=split, checkpoint=c["path"], backend=backend_spec.model_dump(), limit=limit,
                          item_ids=[it.id for it in items])
        out = executor.run(job, key=step_key(archive.path, "eval", h["id"], c["id"], split, round or "x"),
                           gpus=executor.cfg.eval_gpus)
        ep_rows = [r for _, r in read_jsonl(out["episodes"])]
        turn_rows = [r for _, r in read_jsonl(out["turns"])]
        seconds, stats = out["seconds"], out["stats"]
        label = out.get("backend") or backend_spec.label()  # the worker's engine and precision
        if len(ep_rows) != len(items) or sum(r["turns"] for r in ep_rows) != len(turn_rows):
            raise CoevoError(f"remote rollouts of {h['id']} x {c['id']}: {len(ep_rows)} episodes and "
                             f"{len(turn_rows)} turns for {len(items)} items: incomplete")
        score, metrics = t.score(items, [json.loads(r["prediction"]) if r["prediction"] is not None else None
                                         for r in ep_rows])
    else:
        backend = backend or load_backend(backend_spec, c["path"])
        episodes, seconds = timed(run_episodes, spec, t, backend, items, progress=progress)
        score, metrics = t.score(items, [e.prediction for e in episodes])
        stats = summarize(episodes)
        ep_rows, turn_rows = episode_rows(episodes)
        label = backend_spec.label()
    record = dict(harness_id=h["id"], checkpoint_id=c["id"], task=task, split=split, score=score, metrics=metrics,
                  seconds=seconds, round=round, config={"limit": limit, "backend": label,
                                                        "data_dir": str(data_dir) if data_dir else None},
                  **stats)
    return record, ep_rows, turn_rows
