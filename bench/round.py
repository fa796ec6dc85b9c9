"""One round's wall time against the sum of the library calls inside it (ms-swift SFT, mergekit
merge, transformers generation), as a ratio from one run. Runs on a copy of the archive.

    .venv/bin/python bench/round.py [--archive archive.db] [--inheritance merge]
"""
from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine.checkpoints as checkpoints  # noqa: E402
import engine.evolve.rounds as rounds  # noqa: E402
from engine.archive import Archive  # noqa: E402
from engine.evaluate import evaluate_seed_matrix  # noqa: E402
from engine.evolve.ablate import copy_archive  # noqa: E402
from engine.init import init, load_init_config  # noqa: E402
from engine.models.transformers_backend import TransformersBackend  # noqa: E402
from engine.run_config import load_run_config  # noqa: E402

SPENT: dict[str, float] = defaultdict(float)


def timed(kind, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            SPENT[kind] += time.perf_counter() - t0
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", default="archive.db")
    ap.add_argument("--inheritance", default="merge", choices=["select", "merge"])
    args = ap.parse_args()
    with Archive(args.archive) as src:
        init(src, load_init_config())
        evaluate_seed_matrix(src, "smart_home", "dev")
        work = Path(tempfile.mkdtemp(prefix="round-bench-"))
        archive = copy_archive(src, work / "archive.db")
    TransformersBackend.generate = timed("generation (transformers)", TransformersBackend.generate)
    checkpoints.finish_sft = timed("SFT (ms-swift worker)", checkpoints.finish_sft)  # waits for the worker
    checkpoints.run_ties = timed("merge (mergekit)", checkpoints.run_ties)

    cfg = load_run_config(inheritance=args.inheritance)
    runner = rounds.RoundRunner(archive, cfg, log=lambda m: None)
    t0 = time.perf_counter()
    rid = archive.open_round(cfg.mode, cfg.model_dump(mode="json"))["id"]
    result = runner.run_round(rid)
    wall = time.perf_counter() - t0
    library = sum(SPENT.values())
    print(f"one round ({cfg.mode}, inheritance {args.inheritance}): "
          f"{result['evaluate']['harness']} x {result['evaluate']['checkpoint']}, "
          f"score {result['evaluate']['score']:.3f}, TIMR {result['evaluate']['timr']:.1%}")
    for kind, s in sorted(SPENT.items()):
        print(f"  {kind:<28} {s:8.2f}s")
    print(f"  {'library calls, total':<28} {library:8.2f}s")
    print(f"  {'round wall time':<28} {wall:8.2f}s")
    print(f"overhead ratio wall / library: {wall / library:.3f}   (goal <= 1.15)")


if __name__ == "__main__":
    main()
