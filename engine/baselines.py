"""The headline comparison: a small model, co-evolved, against larger models served elsewhere. Every
registered endpoint model is evaluated under each seed harness of a task on a split (its test split by
default), and the best co-evolved pair (by dev score) on the same split; the table is printed, kept in
the archive's folder as JSON, and read by the Overview from the evaluations themselves."""
from __future__ import annotations

import json
from typing import Callable

from engine.archive import Archive
from engine.evaluate import evaluate


def best_coevolved(archive: Archive, task: str, dev_split: str = "dev") -> dict | None:
    """The best pair a round made, by its dev score (then TIMR)."""
    rows = archive.query(
        "SELECT harness_id, checkpoint_id, score, timr FROM evaluations WHERE task = ? AND split = ? "
        "AND round IS NOT NULL ORDER BY score DESC, timr ASC, id LIMIT 1", (task, dev_split))
    return rows[0] if rows else None


def comparison(archive: Archive, task: str, split: str, dev_split: str = "dev") -> list[dict]:
    """One row per endpoint model (its best seed harness) and one for the best co-evolved pair, best first."""
    endpoints = {c["id"]: c for c in archive.checkpoints() if c["kind"] == "endpoint"}
    rows: dict[str, dict] = {}
    for e in archive.query(
            "SELECT id, harness_id, checkpoint_id, score, timr, episodes, tokens FROM evaluations "
            "WHERE task = ? AND split = ? ORDER BY score DESC, timr ASC, id", (task, split)):
        c = endpoints.get(e["checkpoint_id"])
        if c and c["id"] not in rows:
            rows[c["id"]] = {"model": c["name"], "kind": "endpoint", "harness": e["harness_id"],
                             "checkpoint": c["id"], "score": e["score"], "timr": e["timr"], "n": e["episodes"],
                             "tokens": e["tokens"], "evaluation": e["id"]}
    best = best_coevolved(archive, task, dev_split)
    if best:
        found = archive.find_evaluation(best["harness_id"], best["checkpoint_id"], task, split)
        if found:
            e = archive.evaluation(found["id"])
            rows["coevo"] = {"model": archive.checkpoint(best["checkpoint_id"])["name"], "kind": "co-evolved",
                             "harness": best["harness_id"], "checkpoint": best["checkpoint_id"], "score": e["score"],
                             "timr": e["timr"], "n": e["episodes"], "tokens": e["tokens"], "evaluation": e["id"]}
    return sorted(rows.values(), key=lambda r: (-r["score"], r["timr"]))


def run_baselines(archive: Archive, task: str, split: str = "test", *, dev_split: str = "dev",
                  limit: int | None = None, log: Callable[[str], None] = lambda m: None) -> list[dict]:
    """Evaluate what is missing (endpoints x seed harnesses, the best co-evolved pair), then the table."""
    seeds = [h["id"] for h in archive.harnesses(task) if h["creator"] == "seed"]
    pairs = [(h, c["id"]) for c in archive.checkpoints() if c["kind"] == "endpoint" for h in seeds]
    best = best_coevolved(archive, task, dev_split)
    if best:
        pairs.append((best["harness_id"], best["checkpoint_id"]))
    for h, c in pairs:
        if archive.find_evaluation(h, c, task, split) is None:
            r = evaluate(archive, h, c, task, split, limit=limit)
            log(f"  {h:<6} x {c:<6} score {r['score']:.3f}  TIMR {r['timr']:6.1%}")
    table = comparison(archive, task, split, dev_split)
    out = archive.files_dir / "baselines" / f"{task}-{split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(json.dumps(table, indent=1))
    tmp.replace(out)
    return table


def format_table(table: list[dict]) -> str:
    lines = [f"{'model':<28}{'kind':<12}{'harness':<9}{'score':>7}{'TIMR':>8}{'n':>6}{'tokens':>9}"]
    for r in table:
        lines.append(f"{r['model'][:27]:<28}{r['kind']:<12}{r['harness']:<9}{r['score']:>7.3f}{r['timr']:>8.1%}"
                     f"{r['n']:>6}{r['tokens']:>9}")
    return "\n".join(lines)
