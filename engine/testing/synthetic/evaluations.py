"""The evaluations of a synthetic archive, with their episodes and turns: which pairs are evaluated where,
and each evaluation's episodes played from its task's item pool. A turn is one step of the item's gold
or wrong path (as the task's environment answered it) or, at the pair's mismatch rate, an output the
real judge refused, with its reason; an evaluation's counts are the sums over the turns it wrote."""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass

from engine.harness.interfaces import MISMATCH_KINDS
from engine.models import BackendSpec
from engine.testing.synthetic.items import IFACES, Pool
from engine.testing.synthetic.lineage import Checkpoint, Harness, at, correct_rate, mismatch_rate

EVAL_CONFIG = json.dumps({"limit": None, "backend": BackendSpec().label(), "data_dir": None})


@dataclass
class EvalPlan:
    harness: Harness
    checkpoint: Checkpoint
    task: str
    split: str
    round: int | None
    id: int = 0
    turns: int = 0
    at: str = ""


def plan_evaluations(n: int, turns: int, rounds: int, seed: int, harnesses, checkpoints, tasks, splits,
                     mains: dict[int, tuple[Harness, Checkpoint]]) -> list[EvalPlan]:
    """Which pairs are evaluated where: the seed matrix, each round's own evaluation, then a spread over
    pairs (mostly distinct, some re-evaluated), ordered by round like a real archive grows."""
    rng = random.Random(f"{seed}-evaluations")
    roots = [c for c in checkpoints if c.kind == "sft" and c.round is None]
    plans = [EvalPlan(h, c, tasks[0], splits[0], None) for h in harnesses[:3] for c in roots]
    plans += [EvalPlan(h, c, tasks[0], splits[0], r) for r, (h, c) in sorted(mains.items())]
    combos = [(t, s) for t in tasks for s in splits]
    task_w = [2.0 if t == tasks[0] else 1.0 for t in tasks]
    # a harness is mostly evaluated with checkpoints of nearby rounds
    by_round: dict[int, list] = {}
    for c in checkpoints:
        by_round.setdefault(c.round or 0, []).append(c)
    near = {r: [c for q in range(r - 3, r + 4) for c in by_round.get(q, [])] for r in range(rounds + 1)}
    # and often with one trained under its own interface: the pairs a co-evolution run actually makes
    speaks = {i: [c for c in checkpoints if max(c.affinity) > 0.5 and c.affinity.index(max(c.affinity)) == i]
              for i in range(len(IFACES))}
    seen: list[tuple] = []
    while len(plans) < n:
        again = bool(seen) and rng.random() < 0.05
        if again:                               # a re-evaluation of an earlier pair, in the same or a later round
            h, c, t, s = rng.choice(seen)
        else:
            h = rng.choice(harnesses)
            pool = near[h.round or 0]
            x = rng.random()
            if x < 0.4 and speaks[h.iface]:
                c = rng.choice(speaks[h.iface])
            else:
                c = rng.choice(pool) if pool and x < 0.8 else rng.choice(checkpoints)
            if len(seen) < len(combos):         # every task and split gets evaluations
                t, s = combos[len(seen)]
            else:
                t = rng.choices(tasks, weights=task_w)[0]
                s = splits[0] if rng.random() < 0.7 else rng.choice(splits)
            seen.append((h, c, t, s))
        r = max(h.round or 0, c.round or 0)
        if again:
            r = min(rounds, r + rng.randint(0, 3))
        plans.append(EvalPlan(h, c, t, s, r or None))
    plans = plans[:n]
    plans.sort(key=lambda p: p.round or 0)    # stable: ids grow with rounds
    _spread_turns(plans, turns, rng)
    in_round: dict[int, int] = {}
    for p in plans:
        in_round[p.round or 0] = in_round.get(p.round or 0, 0) + 1
    k: dict[int, int] = {}
    for i, p in enumerate(plans):
        p.id = i + 1
        r = p.round or 0
        k[r] = k.get(r, 0) + 1
        # evaluations fill the last part of their round's window, in id order
        p.at = at(p.round, 4000 + k[r] * min(1.0, 3000 / in_round[r]))
    return plans


def _spread_turns(plans: list[EvalPlan], total: int, rng: random.Random) -> None:
    """Turns per evaluation: the mean, jittered in pairs (+d, -d) so the total stays exact."""
    if not plans:
        return
    base, extra = divmod(total, len(plans))
    for i, p in enumerate(plans):
        p.turns = base + (1 if i < extra else 0)
    for i in range(0, len(plans) - 1, 2):
        d = rng.randint(0, base // 4)
        if plans[i + 1].turns - d >= 1:
            plans[i].turns += d
            plans[i + 1].turns -= d


class EvalWriter:
    """Generates the turn rows of a chunk of evaluations, collecting its episode and evaluation rows
    on the way: an evaluation's counts are the sums over the turns just generated."""

    def __init__(self, pools: dict[tuple[str, str], Pool], seed: int, max_turns: int):
        self.pools, self.max_turns = pools, max_turns
        self.rng = random.Random(f"{seed}-turns")
        self.episodes: list[dict] = []
        self.evaluations: list[dict] = []
        self.results: list[tuple] = []     # (id, harness, checkpoint, task, split, round, score, timr)
        self.retry: dict[tuple[str, str], str] = {}  # (template, error) -> the retry message, one string each

    def turns(self, plans: list[EvalPlan]):
        for plan in plans:
            yield from self._evaluation(plan)

    def _evaluation(self, plan: EvalPlan):
        """Episodes as the runtime plays them: the steps of the item's path, any of which the model may
        break (a mismatch ends the episode unless the harness retries: then the same step is tried again,
        once). Episodes follow each other until the evaluation's turn budget is spent, so its total is exact."""
        rnd = self.rng.random
        h, c = plan.harness, plan.checkpoint
        pool = self.pools[plan.task, plan.split]
        items = pool.items
        p = min(0.97, max(0.005, mismatch_rate(h, c) * (0.85 + 0.3 * rnd())))
        q = correct_rate(h, c, plan.task)
        key = h.iface * 2 + (1 if h.spec["strict"] else 0)
        # the checkpoint answers in the interface it knows best: that is the typical mismatch
        best = max(range(len(IFACES)), key=lambda i: c.affinity[i])
        dominant = best if best != h.iface and c.affinity[best] >= 0.3 else None
        loop = h.spec["loop"]
        retries, template = loop["retry_on_parse_error"], loop["retry_message"]
        variant, eid, iface = h.variant, plan.id, h.iface
        start = int(rnd() * len(items))
        remaining = plan.turns
        n_mism = tokens = successes = 0
        cat_n = [0] * len(pool.categories)
        kinds = Counter()
        cat_ok = [0] * len(pool.categories)
        ep = 0
        while remaining > 0:
            item = items[(start + ep) % len(items)]
            path = item.gold if rnd() < q else item.wrong
            steps = path.steps[:self.max_turns]
            cap = len(steps) + (1 if retries else 0)
            prompt = item.prompts[variant]
            ep_mism = t = s = 0
            reward = 0.0
            while True:
                step = steps[s]
                more = t + 1 < cap and t + 1 < remaining        # could another turn follow?
                if rnd() < p:
                    wrong_format, garbage = step.mismatch[key]
                    if dominant is not None and dominant in wrong_format and rnd() < 0.75:
                        out, err, kind, tok = wrong_format[dominant]
                    elif garbage:
                        out, err, kind, tok = garbage[int(rnd() * len(garbage))]
                    else:
                        out, err, kind, tok = next(iter(wrong_format.values()))
                    again = retries and more
                    feedback = self._retry(template, err) if again else ""
                    yield dict(evaluation_id=eid, episode=ep, turn=t, prompt=prompt, output=out, action=None,
                               parse_error=err, mismatch=1, feedback=feedback, reward=0.0, tokens=tok)
                    ep_mism += 1
                    kinds[kind] += 1
                else:
                    out, tok = step.outputs[iface]
                    feedback = step.feedback
                    reward += step.reward
                    yield dict(evaluation_id=eid, episode=ep, turn=t, prompt=prompt, output=out, action=step.action,
                               parse_error=None, mismatch=0, feedback=feedback, reward=step.reward, tokens=tok)
                    s += 1
                    again = s < len(steps) and more
                tokens += tok
                t += 1
                if not again:
                    break
                prompt = feedback     # the next turn's prompt is what the model was just told
            finished = s == len(path.steps)
            success = int(finished and path.success)
            remaining -= t
            n_mism += ep_mism
            successes += success
            cat_n[item.category] += 1
            cat_ok[item.category] += success
            self.episodes.append(dict(evaluation_id=eid, idx=ep, item_id=item.id, input=item.input, sample=0,
                                      success=success, reward=reward, turns=t, mismatched_turns=ep_mism,
                                      prediction=path.prediction if finished else None))
            ep += 1
        n_turns = plan.turns
        score = successes / ep
        timr = n_mism / n_turns
        metrics = _metrics(pool.categories, score, cat_n, cat_ok, p)
        seconds = round(n_turns * (0.04 + 0.02 * rnd()) + 2.0, 3)
        self.evaluations.append(dict(id=eid, harness_id=h.id, checkpoint_id=c.id, task=plan.task, split=plan.split,
                                     score=score, metrics=json.dumps(metrics), episodes=ep, turns=n_turns,
                                     mismatched_turns=n_mism, timr=timr, tokens=tokens, seconds=seconds,
                                     mismatch_kinds=json.dumps({k: kinds[k] for k in MISMATCH_KINDS if kinds[k]}),
                                     config=EVAL_CONFIG, round=plan.round, created_at=plan.at))
        self.results.append((eid, h.id, c.id, plan.task, plan.split, plan.round, score, timr))

    def _retry(self, template: str, error: str) -> str:
        hit = self.retry.get((template, error))
        if hit is None:
            hit = self.retry[template, error] = template.format(error=error)
        return hit


def _metrics(categories: list[str], score: float, cat_n: list, cat_ok: list, p: float) -> dict:
    """Task metrics shaped like the real scorers': success per category and overall, with precision and
    recall a little above success (partly right answers count there)."""
    def pool(n, ok):
        if n == 0:
            return {"n": 0, "success": None, "precision": None, "recall": None, "f1": None}
        s = ok / n
        prec = min(1.0, s + (1 - s) * (1 - p) * 0.3)
        rec = min(1.0, s + (1 - s) * (1 - p) * 0.2)
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        return {"n": n, "success": s, "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4)}

    out = {cat: pool(cat_n[i], cat_ok[i]) for i, cat in enumerate(categories)}
    out["overall"] = pool(sum(cat_n), sum(cat_ok))
    out["overall"]["success"] = score
    return out


