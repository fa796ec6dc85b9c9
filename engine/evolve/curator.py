"""The Curator picks parent harnesses: the weighted rule of Darwin Gödel Machine / ShinkaEvolve,
sigmoid(lambda * (score - median score)) * 1 / (1 + children), sampled with a seeded generator."""
from __future__ import annotations

import math
import random
import statistics

from engine.archive import Archive


def parent_weights(archive: Archive, task: str, split: str, *, sharpness: float = 10.0,
                   pool: list[str] | None = None) -> dict[str, dict]:
    best = archive.best_scores(task, split)
    ids = [h for h in (pool or best) if h in best]
    if not ids:
        return {}
    mid = statistics.median(best[h]["score"] for h in ids)
    children = archive.children_counts()
    out = {}
    for h in ids:
        s = best[h]["score"]
        w = 1 / (1 + math.exp(-sharpness * (s - mid))) / (1 + children.get(h, 0))
        out[h] = {"score": s, "timr": best[h]["timr"], "checkpoint": best[h]["checkpoint_id"],
                  "children": children.get(h, 0), "weight": w}
    return out


def pick_parent(weights: dict[str, dict], rng: random.Random) -> str:
    ids = sorted(weights)
    return rng.choices(ids, weights=[weights[h]["weight"] for h in ids])[0]
