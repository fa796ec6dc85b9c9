"""Model inheritance: which checkpoint a new harness starts from. Each policy returns a proposal
(candidates, evidence, choice, rationale) that becomes a decision row."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from engine.archive import Archive, probe_split
from engine.archive.lineage import lowest_common_ancestor
from engine.harness.spec import HarnessSpec
from engine.models import BackendSpec, load_backend
from engine.registry import Registry
from engine.rollout import episode_rows, run_episodes, summarize, timed
from engine.tasks.base import Item, Task


@dataclass
class InheritContext:
    archive: Archive
    spec: HarnessSpec
    task: Task
    probe_items: list[Item]
    latest: str            # the newest checkpoint of this run's lineage
    start: str             # the run's starting checkpoint
    round: int
    stage1: int = 8        # cheap probe: this many items for every candidate
    contenders: int = 2    # the best this many get the full probe set
    backend_cache: dict = field(default_factory=dict)
    backend: BackendSpec = field(default_factory=BackendSpec)
    harness_id: str | None = None   # set: every probe is stored as an evaluation on split '<split>:probe'
    split: str = "dev"              # where the probe items come from
    excluded: set[str] = field(default_factory=set)  # checkpoints a person excluded from inheritance
    # (harness spec, checkpoint) -> {item id: episode}: what probes ran, so that a longer probe of the same
    # pair runs only the items the shorter one did not
    episodes: dict = field(default_factory=dict)


@dataclass
class Proposal:
    candidates: list[str]
    evidence: dict
    choice: str
    rationale: str


POLICIES: Registry = Registry("inheritance policy")


def candidates(archive: Archive, task: str, excluded: set[str] = frozenset()) -> list[str]:
    """The checkpoints of this task's lineage (and models registered from outside), less the excluded."""
    tasks = archive.checkpoint_tasks()
    ckpts = [c for c in archive.checkpoints() if tasks.get(c["id"]) in (task, None) and c["id"] not in excluded
             and c["kind"] != "endpoint"]  # a served model has no weights to inherit
    trained = [c["id"] for c in ckpts if c["kind"] != "base"]
    return trained or [c["id"] for c in ckpts]


def probe(ctx: InheritContext, cid: str, items: list[Item]) -> dict:
    """The pair's score and TIMR on the probe items. Stored as an evaluation of its own split (so the
    matrix shows it, marked as a probe), and reused from there when a killed round probes again. Items the
    pair was already probed on in this context are not run again (the contenders' full probe extends their
    first one)."""
    split = probe_split(ctx.split)
    if ctx.harness_id:
        found = ctx.archive.find_evaluation(ctx.harness_id, cid, ctx.task.name, split, episodes=len(items))
        if found:
            return {"score": found["score"], "timr": found["timr"], "n": len(items), "evaluation": found["id"]}
    ran = ctx.episodes.setdefault((ctx.spec.model_dump_json(), cid), {})
    todo = [it for it in items if it.id not in ran]
    seconds = 0.0
    if todo:
        backend = ctx.backend_cache.get(cid) or load_backend(ctx.backend, ctx.archive.checkpoint(cid)["path"])
        ctx.backend_cache[cid] = backend
        fresh, seconds = timed(run_episodes, ctx.spec, ctx.task, backend, todo)
        ran.update((e.item.id, e) for e in fresh)
    episodes = [ran[it.id] for it in items]
    score, metrics = ctx.task.score(items, [e.prediction for e in episodes])
    stats = summarize(episodes)
    out = {"score": score, "timr": stats["timr"], "n": len(items)}
    if ctx.harness_id:
        record = dict(harness_id=ctx.harness_id, checkpoint_id=cid, task=ctx.task.name, split=split, score=score,
                      metrics=metrics, seconds=seconds, round=ctx.round,
                      config={"probe": True, "limit": len(items), "reused": len(items) - len(todo),
                              "backend": ctx.backend.label()}, **stats)
        out["evaluation"] = ctx.archive.add_evaluation(record, *episode_rows(episodes))
    return out


def read_probe(ctx: InheritContext, evaluation: dict, items: list[Item]) -> dict | None:
    """The pair's probe read off its evaluation on the split, when that evaluation holds every probe item and
    ran on the context's backend: the same items, harness, checkpoint and engine need no second run. None
    otherwise."""
    rows = {e["item_id"]: e for e in ctx.archive.episodes(evaluation["id"])}
    if (evaluation["config"] or {}).get("backend") != ctx.backend.label() or any(it.id not in rows for it in items):
        return None
    episodes = [rows[it.id] for it in items]
    score, _ = ctx.task.score(items, [None if e["prediction"] is None else json.loads(e["prediction"])
                                      for e in episodes])
    turns = sum(e["turns"] for e in episodes)
    return {"score": score, "timr": sum(e["mismatched_turns"] for e in episodes) / turns if turns else 0.0,
            "n": len(items), "evaluation": evaluation["id"]}


def staged_probe(ctx: InheritContext, cids: list[str]) -> dict[str, dict]:
    """Every candidate on a small subset; only the contenders on the whole probe set."""
    first = ctx.probe_items[:ctx.stage1]
    results = {cid: probe(ctx, cid, first) for cid in cids}
    ranked = sorted(cids, key=lambda c: (-results[c]["score"], results[c]["timr"], c))
    for cid in ranked[ctx.contenders:]:  # keep only the contenders' models in memory
        ctx.backend_cache.pop(cid, None)
    if len(ctx.probe_items) > ctx.stage1:
        for cid in ranked[:ctx.contenders]:
            results[cid] = probe(ctx, cid, ctx.probe_items)
    return results


def rank(results: dict[str, dict]) -> list[str]:
    """Score first, TIMR to break ties; a candidate probed on more items wins a full tie."""
    return sorted(results, key=lambda c: (-results[c]["score"], results[c]["timr"], -results[c]["n"], c))


@POLICIES.register("select")
def select(ctx: InheritContext) -> Proposal:
    cids = candidates(ctx.archive, ctx.task.name, ctx.excluded)
    results = staged_probe(ctx, cids)
    best = rank(results)[0]
    r = results[best]
    return Proposal(cids, {"probe": results}, best,
                    f"{best} fits harness {ctx.spec.name} best: score {r['score']:.3f}, TIMR {r['timr']:.1%} "
                    f"on {r['n']} probe tasks")


@POLICIES.register("merge")
def merge(ctx: InheritContext) -> Proposal:
    from engine.checkpoints import merge as ties_merge, register

    cids = candidates(ctx.archive, ctx.task.name, ctx.excluded)
    results = staged_probe(ctx, cids)
    top = rank(results)[:2]
    dag = ctx.archive.checkpoint_lineage()
    base = lowest_common_ancestor(dag, top) if len(top) == 2 else None
    if base is None or base in top:
        return Proposal(cids, {"probe": results}, top[0],
                        f"no TIES merge ({'one candidate' if len(top) < 2 else 'one is the ancestor of the other'}); "
                        f"selected {top[0]}")
    name = f"merge-r{ctx.round}-{'-'.join(top)}"
    merged = ctx.archive.find_checkpoint(name)  # a resumed round merged these already
    if merged is None:
        merged = register(ctx.archive, ties_merge(ctx.archive, top, base, name, density=0.5), round=ctx.round)
    results[merged] = probe(ctx, merged, ctx.probe_items)
    return Proposal(cids + [merged], {"probe": results, "merge": {"models": top, "base": base}}, merged,
                    f"TIES merge of {top[0]} and {top[1]} over their common ancestor {base}")


@POLICIES.register("latest")
def latest(ctx: InheritContext) -> Proposal:
    return Proposal([ctx.latest], {}, ctx.latest, "always continue from the newest checkpoint")


@POLICIES.register("fixed")
def fixed(ctx: InheritContext) -> Proposal:
    return Proposal([ctx.start], {}, ctx.start, "the model never changes")
