"""Does co-evolution improve a pretrained brain? Runs a brain's preset (init, seed matrix, rounds) and
prints per round the pair, dev score, TIMR, the turns with a call that constrained decoding mended ("mended"),
kept successes, SFT examples and each step's wall time; then the held-out result on the benchmark's
official rows (never used for training, sampling or probing) for the best seed pair and the best
co-evolved pair, per category and overall. With --ablate every mode
(coevo, harness-only, model-only, no-inheritance) runs its rounds from the same start, and each mode's
best round pair is evaluated on the official rows.

    .venv/bin/python bench/rsi.py [--brain smollm2-135m] [--task smart_home] [--rounds 3]
                                  [--archive DIR/archive.db] [--heldout-limit N] [--json]
                                  [--data KEY=VALUE] [--seed-option KEY=VALUE] [--fix-option KEY]
                                  [--set FIELD=VALUE] [--init FIELD=VALUE] [--ablate]

A killed run resumes where it stopped (same --archive). With --json the last line is one JSON object:
heldout_seed_best, heldout_coevo_best (success on the official rows, 0-1), max_round_timr (0-1), wall_s,
heldout_top_answer_share (the share of the official rows given each pair's most frequent answer) and
heldout_top_answer_alone (what that answer alone scores given to every one of those rows: the level that
one stock answer, such as always abstaining, reaches there).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from itertools import zip_longest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from engine.archive import Archive  # noqa: E402
from engine.config import validate  # noqa: E402
from engine.evaluate import evaluate, evaluate_seed_matrix  # noqa: E402
from engine.evolve.ablate import ablate, mode_archive_path  # noqa: E402
from engine.evolve.rounds import RoundRunner  # noqa: E402
from engine.init import init, load_init_config  # noqa: E402
from engine.run_config import MODES, load_run_config  # noqa: E402
from engine.tasks import get_task  # noqa: E402
from engine.views import top_prediction  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
HELDOUT = {  # task -> (data folder, split): the official rows
    "smart_home": (SHARED / "homebench", SHARED / "homebench" / "dev_sample_160.jsonl"),
    "rbac_sql": (SHARED / "rbac_text2sql", SHARED / "rbac_text2sql" / "department_store_144.jsonl"),
    "failure_attribution": (SHARED / "who_and_when", SHARED / "who_and_when" / "Algorithm-Generated"),
}


def stratified(items, limit: int | None):
    """The first `limit` items taking categories in turn, so a subset keeps every category."""
    if not limit or limit >= len(items):
        return items
    by_cat = defaultdict(list)
    for it in items:
        by_cat[it.category].append(it)
    mixed = [it for group in zip_longest(*by_cat.values()) for it in group if it is not None]
    return mixed[:limit]


def step_seconds(archive, rnd: dict) -> dict[str, float]:
    """Each step's wall time from the archive's timestamps (so a resumed run reports them too)."""
    from datetime import datetime
    rows = archive.query("SELECT step, finished_at FROM round_steps WHERE round_id = ? ORDER BY finished_at",
                         (rnd["id"],))
    out, last = {}, datetime.fromisoformat(rnd["created_at"])
    for r in rows:
        at = datetime.fromisoformat(r["finished_at"])
        out[r["step"]] = round((at - last).total_seconds(), 1)
        last = at
    return out


def key_values(pairs: list[str], flag: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


def best(rows: list[dict]) -> dict:
    return max(rows, key=lambda e: (e["score"], -e["timr"], e["id"]))


def merged_roots(archive, config, cfg, log) -> list[dict]:
    """A TIES merge of the roots over their common ancestor (the base), under every seed harness."""
    from engine.checkpoints import merge, register
    roots = [archive.checkpoint(r.name)["id"] for r in config.roots]
    base = archive.checkpoint(config.base_name)["id"]
    name = "merge-" + "-".join(r.name for r in config.roots)
    found = archive.find_checkpoint(name)
    merged = found or register(archive, merge(archive, roots, base, name))
    seeds = {h["id"]: h["name"] for h in archive.harnesses(cfg.task) if h["creator"] == "seed"}
    done = {(e["harness"], e["checkpoint"]) for e in archive.matrix(cfg.task, cfg.split)}
    for hid, hname in seeds.items():
        if (hid, merged) not in done:
            r = evaluate(archive, hid, merged, cfg.task, cfg.split, backend_spec=cfg.backend)
            log(f"  {hname:<24} x {name} score {r['score']:.3f}  TIMR {r['timr']:6.1%}")
    return [dict(harness=seeds[e["harness"]], checkpoint=e["checkpoint"], score=e["score"], timr=e["timr"])
            for e in archive.evaluations() if e["checkpoint"] in roots + [merged] and e["split"] == cfg.split
            and e["round"] is None and e["harness"] in seeds]


def with_settings(cfg, settings: dict[str, str], flag: str = "--set"):
    """The config with dotted fields replaced (`--set sample.replay=32`, `--init root_items=32`), validated
    like the file."""
    data = cfg.model_dump()
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise SystemExit(f"{flag} {key}: the {type(cfg).__name__} has no such field")
        node[leaf] = yaml.safe_load(value)
    return validate(type(cfg), data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brain", default="smollm2-135m")
    ap.add_argument("--task", default="smart_home")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--archive", help="archive path (default: a fresh temporary folder)")
    ap.add_argument("--heldout-limit", type=int, help="a stratified subset of the official rows (default: all)")
    ap.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                    help="a data generator option of the preset, e.g. homes=../shared/data/homebench/"
                         "home_status_method.jsonl (instructions drawn over the benchmark's own homes)")
    ap.add_argument("--seed-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a task option set on every seed harness, e.g. rooms=mentioned")
    ap.add_argument("--fix-option", action="append", default=[], metavar="KEY",
                    help="a task option the rounds' edits keep as their parent has it, e.g. rooms (added to the "
                         "preset's)")
    ap.add_argument("--ablate", action="store_true",
                    help="run every mode (coevo, harness-only, model-only, no-inheritance) from the same start "
                         "and evaluate each mode's best round pair on the official rows")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a run config field of the preset, dotted, e.g. sample.replay=32")
    ap.add_argument("--init", action="append", default=[], metavar="FIELD=VALUE",
                    help="an init config field of the preset, dotted, e.g. root_items=32 or sizes.dev=24")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    path = Path(args.archive) if args.archive else Path(tempfile.mkdtemp(prefix="coevo-rsi-")) / "archive.db"
    config = load_init_config(task=args.task, brain=args.brain)
    config.data.update(key_values(args.data, "--data"))
    config.seed_task_options.update(key_values(args.seed_option, "--seed-option"))
    config = with_settings(config, key_values(args.init, "--init"), "--init")
    preset = load_run_config(task=args.task, brain=args.brain)
    cfg = load_run_config(task=args.task, brain=args.brain, fixed_task_options=(
        list(dict.fromkeys(preset.fixed_task_options + args.fix_option)) if args.fix_option else None))
    cfg = with_settings(cfg, key_values(args.set, "--set"))
    t0 = time.perf_counter()
    with Archive(path) as archive, ExitStack() as stack:
        log = lambda m: print(m, flush=True)  # noqa: E731
        init(archive, config, log=log)
        t_init = time.perf_counter() - t0
        evaluate_seed_matrix(archive, config.task, cfg.split, backend_spec=cfg.backend, log=log)
        t_seeds = time.perf_counter() - t0 - t_init
        if args.ablate:  # every mode from this start, each in its own archive
            ablate(archive, cfg, args.rounds, log=log)
            runs = {m: stack.enter_context(Archive(mode_archive_path(archive, cfg, m))) for m in MODES}
        else:
            RoundRunner(archive, cfg, log=log).run(args.rounds)
            runs = {cfg.mode: archive}
        t_rounds = time.perf_counter() - t0 - t_init - t_seeds

        seed_ids = {h["id"] for h in archive.harnesses(cfg.task) if h["creator"] == "seed"}
        roots = {archive.checkpoint(r.name)["id"] for r in config.roots}
        seeds = [e for e in dev_evaluations(archive, cfg)
                 if e["round"] is None and e["harness"] in seed_ids and e["checkpoint"] in roots]
        seed_best = best(seeds)
        rounds = {m: round_rows(a) for m, a in runs.items()}

        merge_rows = merged_roots(archive, config, cfg, log) if len(config.roots) >= 2 else []

        data_dir, split = HELDOUT[cfg.task]
        task = get_task(cfg.task, data_dir)
        items = stratified(task.load(str(split)), args.heldout_limit)
        split_name = f"heldout:{split.name}" + (f"[{len(items)}]" if args.heldout_limit else "")
        official = lambda a, e: heldout(a, e, cfg, data_dir, items, split_name)  # noqa: E731
        heldout_rows = {"seed": official(archive, seed_best)}
        for m, a in runs.items():
            ids = {r["evaluation"] for r in rounds[m]}
            mode_best = best([e for e in dev_evaluations(a, cfg) if e["id"] in ids]) if ids else seed_best
            heldout_rows[m] = official(a, mode_best)
        top = {label: top_prediction(runs.get(label, archive), e["id"]) for label, e in heldout_rows.items()}
        alone = {label: answer_alone(prediction, task, items) for label, (prediction, _) in top.items()}
    wall = time.perf_counter() - t0

    print(f"\n{args.brain} on {cfg.task}: init {t_init:.0f}s, seed matrix {t_seeds:.0f}s, "
          f"{args.rounds} rounds x {len(runs)} mode(s) {t_rounds:.0f}s, wall {wall:.0f}s")
    print(f"\nseed pairs on {cfg.split}:")
    for e in seeds:
        print(f"  {e['harness']:<5} x {e['checkpoint']:<5} score {e['score']:.3f}  TIMR {e['timr']:6.1%}")
    for m, rows in rounds.items():
        print(f"\n{m} rounds:" if args.ablate else "")
        print(f"{'round':<6}{'pair':<12}{'score':>7}{'TIMR':>8}{'mended':>7}{'kept':>6}{'SFT':>5}  step seconds")
        for r in rows:
            print(f"{r['round']:<6}{r['harness'] + ' x ' + r['checkpoint']:<12}{r['score']:>7.3f}{r['timr']:>8.1%}"
                  f"{r['constrained_turns']:>7}{r['kept']:>6}{r['sft_examples']:>5}  {r['steps']}")
    print("\nthe roots and their TIES merge (base: their common ancestor) under each seed harness:")
    for r in merge_rows:
        print(f"  {r['harness']:<24} x {r['checkpoint']:<5} score {r['score']:.3f}  TIMR {r['timr']:6.1%}")
    print_heldout(heldout_rows, split_name, len(items))
    print("the most frequent answer of each pair (a share near 1: one answer whatever the input), and what it "
          "alone scores given to every row:")
    for label, (prediction, share) in top.items():
        print(f"  {label:<16}{share:6.1%}  alone {alone[label]:.3f}  {(prediction or '(none)')[:60]}")
    if args.json:
        main_mode = "coevo" if args.ablate else cfg.mode
        out = {"brain": args.brain, "task": cfg.task, "archive": str(path),
               "heldout_seed_best": heldout_rows["seed"]["score"],
               "heldout_coevo_best": heldout_rows[main_mode]["score"],
               "heldout_rows": len(items),
               "max_round_timr": max((r["timr"] for r in rounds[main_mode]), default=None),
               "heldout_top_answer_share": {label: round(share, 4) for label, (_, share) in top.items()},
               "heldout_top_answer_alone": {label: round(score, 4) for label, score in alone.items()},
               "rounds": rounds[main_mode], "merge": merge_rows, "wall_s": round(wall, 1)}
        if args.ablate:
            out["ablation"] = {m: {"rounds": rounds[m], "heldout": heldout_rows[m]["score"],
                                   "heldout_timr": heldout_rows[m]["timr"]} for m in runs}
        print(json.dumps(out))


def dev_evaluations(archive, cfg) -> list[dict]:
    return [e for e in archive.evaluations() if e["task"] == cfg.task and e["split"] == cfg.split]


def round_rows(archive) -> list[dict]:
    """Per finished round: its pair, dev score and TIMR, the turns with a call that constrained decoding
    mended, kept successes, SFT examples, step seconds."""
    rows = []
    for r in archive.rounds():
        if r["state"] != "done":
            continue
        ev, sample, sft = (archive.step_result(r["id"], s) for s in ("evaluate", "sample", "sft"))
        rows.append(dict(round=r["id"], harness=ev["harness"], checkpoint=ev["checkpoint"], score=ev["score"],
                         timr=ev["timr"], constrained_turns=archive.evaluation(ev["evaluation"])["constrained_turns"],
                         kept=sample["kept"], sft_examples=sample["kept"] + sample.get("replayed", 0) if sft["trained"] else 0,
                         evaluation=ev["evaluation"], steps=step_seconds(archive, r)))
    return rows


def heldout(archive, pair: dict, cfg, data_dir, items, split_name: str) -> dict:
    """The pair's evaluation on the official rows; evaluated once (a resumed run reads it back)."""
    done = [h for h in archive.evaluations() if h["split"] == split_name and h["harness"] == pair["harness"]
            and h["checkpoint"] == pair["checkpoint"]]
    if done:
        return archive.evaluation(done[-1]["id"])
    return evaluate(archive, pair["harness"], pair["checkpoint"], cfg.task, split_name, data_dir=data_dir,
                    items=items, backend_spec=cfg.backend)


def answer_alone(prediction: str | None, task, items) -> float:
    """The score of one stored prediction (JSON) given to every row: a pair that scores no more than its most
    frequent prediction alone has learned one stock answer (HomeBench's `error_input` is right on every IS row)."""
    return task.score(items, [json.loads(prediction) if prediction else None] * len(items))[0]


def print_heldout(records: dict[str, dict], split_name: str, n: int) -> None:
    metrics = records["seed"]["metrics"]
    if not any(isinstance(v, float) for v in metrics.values()):  # per category, as HomeBench reports
        print(f"\nheld-out ({split_name}, {n} rows): success per category")
        cols = [c for c in metrics if c != "overall"] + ["overall"]
        cell = lambda m, c: _success(m.get(c))  # noqa: E731
    else:  # one row of rates, as Spider-AC and Who&When report
        print(f"\nheld-out ({split_name}, {n} rows)")
        cols = [c for c, v in metrics.items() if isinstance(v, float)]
        cell = lambda m, c: f"{m[c]:.3f}" if isinstance(m.get(c), (int, float)) else "-"  # noqa: E731
    width = max(9, *(len(c) + 2 for c in cols))
    print(f"{'pair':<34}" + "".join(f"{c:>{width}}" for c in cols) + f"{'TIMR':>8}")
    for label, e in records.items():
        cells = "".join(f"{cell(e['metrics'], c):>{width}}" for c in cols)
        print(f"{label + ' ' + e['harness_id'] + ' x ' + e['checkpoint_id']:<34}{cells}{e['timr']:>8.1%}")


def _success(m) -> str:
    if not isinstance(m, dict):
        return "-"
    v = m.get("success", m.get("accuracy"))
    return f"{v:.3f}" if isinstance(v, (int, float)) else "-"


if __name__ == "__main__":
    main()
