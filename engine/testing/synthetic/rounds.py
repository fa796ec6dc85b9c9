"""The rounds of a synthetic archive, their steps and decisions, and a few jobs in every state: the
step list, run config and decision evidence as the round controller writes them, consistent with the
lineage and the evaluations already built."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

from engine.run_config import STEPS
from engine.run_config import RunConfig
from engine.testing.synthetic.lineage import Checkpoint, Harness, at, correct_rate, mismatch_rate

# when, in seconds into its round, each step finishes; the rows a step writes are timed before it
STEP_AT = {"curate": 600, "edit": 1500, "inherit": 2000, "sample": 2900, "sft": 3100, "evaluate": 7000}
PEOPLE = ("alice", "bob", "chen")
APPROVE_COMMENTS = ("looks right", "ok, the probe agrees", "fine by me", None)
OVERRIDE_COMMENTS = ("prefer the xml lineage", "the chosen one regressed on test", "keep the tool_call branch alive",
                     "too many children already")


def round_mains(harnesses, checkpoints, rounds: int) -> dict[int, tuple[Harness, Checkpoint]]:
    """Each round's own harness (the edit) and checkpoint (the SFT): the first of that round."""
    out = {}
    for r in range(1, rounds + 1):
        h = next(h for h in harnesses if h.round == r)
        c = next(c for c in checkpoints if c.round == r and c.kind == "sft")
        out[r] = (h, c)
    return out


def _run_config(seed: int, tasks, splits, gate: str) -> str:
    """The run config as a round row stores it (RunConfig's own fields and defaults)."""
    cfg = RunConfig(task=tasks[0], split=splits[0], gate=gate, seed=seed)
    return json.dumps(cfg.model_dump(mode="json"))


class RoundWriter:
    """Rounds, their six steps and their two decisions, consistent with the lineage already built."""

    def __init__(self, seed, rounds, pending, harnesses, checkpoints, datasets, results, mains, tasks, splits):
        self.rng = random.Random(f"{seed}-rounds")
        self.seed, self.rounds, self.pending = seed, rounds, pending
        self.harnesses, self.checkpoints = harnesses, checkpoints
        self.datasets = {d.id: d for d in datasets}
        self.results, self.mains, self.tasks, self.splits = results, mains, tasks, splits
        self.round_rows, self.step_rows, self.decision_rows = [], [], []

    def build(self):
        own_eval = {}
        for eid, hid, cid, task, split, r, score, timr in self.results:
            main = self.mains.get(r)
            if main and (hid, cid, task, split) == (main[0].id, main[1].id, self.tasks[0], self.splits[0]):
                own_eval.setdefault(r, (eid, score, timr))
        best: dict[str, tuple] = {}     # harness -> best (score, -timr, timr) on the main task split, so far
        results = sorted(self.results, key=lambda x: (x[5] or 0, x[0]))
        pos = 0
        for r in range(1, self.rounds + 2):
            while pos < len(results) and (results[pos][5] or 0) < r:
                eid, hid, cid, task, split, _, score, timr = results[pos]
                if task == self.tasks[0] and split == self.splits[0]:
                    if hid not in best or (score, -timr) > best[hid][:2]:
                        best[hid] = (score, -timr, timr)
                pos += 1
            if r <= self.rounds:
                self._done_round(r, best, own_eval.get(r))
            elif self.pending:
                self._pending_round(r, best)

    # a done round: auto decisions mostly, some settled by a person
    def _done_round(self, r, best, own):
        h, c = self.mains[r]
        init = next(p for p, role in c.parents if role == "init")
        # most rounds ran with the auto gate; in the others a person settled both decisions
        gate = "require" if self.rng.random() < 0.15 else "auto"
        statuses = [self._status() if gate == "require" else "auto" for _ in range(2)]
        self.round_rows.append(dict(id=r, mode="coevo", state="done",
                                    config=_run_config(self.seed, self.tasks, self.splits, gate), created_at=at(r, 0),
                                    finished_at=at(r, STEP_AT["evaluate"] + 100)))
        parents_d = self._parents_decision(r, best, h.parents[0], statuses[0])
        inherit_d = self._inheritance_decision(r, h, init, statuses[1])
        d = self.datasets[c.dataset_id]
        results = {
            "curate": {"parents": [h.parents[0]], "decision": parents_d},
            "edit": {"harness": h.id, "operator": h.operator, "rationale": h.rationale, "refused": None},
            "inherit": {"checkpoint": init, "decision": inherit_d},
            "sample": {"dataset": d.id, "tasks_tried": d.tasks_tried, "samples": d.samples, "kept": d.kept},
            "sft": {"checkpoint": c.id, "trained": True},
            "evaluate": ({"evaluation": own[0], "harness": h.id, "checkpoint": c.id, "score": own[1], "timr": own[2]}
                         if own else {"evaluation": None, "harness": h.id, "checkpoint": c.id}),
        }
        for step in STEPS:
            self.step_rows.append(dict(round_id=r, step=step, state="done", result=json.dumps(results[step]),
                                       finished_at=at(r, STEP_AT[step])))

    # the final round: running, waiting on `pending` proposed decisions
    def _pending_round(self, r, best):
        self.round_rows.append(dict(id=r, mode="coevo", state="running",
                                    config=_run_config(self.seed, self.tasks, self.splits, "require"),
                                    created_at=at(r, 0), finished_at=None))
        latest_h = self.harnesses[-1]
        for k in range(self.pending):
            if k % 2 == 0:
                self._parents_decision(r, best, None, "proposed")
            else:
                self._inheritance_decision(r, latest_h, None, "proposed")

    def _status(self) -> str:
        """How a person settled a decision under the require gate."""
        return "overridden" if self.rng.random() < 0.3 else "approved"

    def _decision(self, r, step, kind, candidates, evidence, proposed, choice, rationale, status):
        did = len(self.decision_rows) + 1
        when = 300 if kind == "parents" else 1600      # before the step (curate, inherit) that waits on it
        created = at(r, when)
        if status == "auto":
            by, comment, decided = "engine", None, created
        elif status == "proposed":
            by, comment, decided, choice = None, None, None, proposed
        else:
            by = self.rng.choice(PEOPLE)
            comment = self.rng.choice(APPROVE_COMMENTS if status == "approved" else OVERRIDE_COMMENTS)
            decided = at(r, when + 60 + int(self.rng.random() * 180))
        self.decision_rows.append(dict(id=did, round_id=r, step=step, kind=kind, candidates=json.dumps(candidates),
                                       evidence=json.dumps(evidence), choice=choice, rationale=rationale,
                                       status=status, decided_by=by, comment=comment, created_at=created,
                                       decided_at=decided))
        return did

    def _parents_decision(self, r, best, choice, status) -> int:
        earlier = [h for h in self.harnesses if (h.round or 0) < r]
        children: dict[str, int] = {}
        for h in earlier:
            for p in h.parents:
                children[p] = children.get(p, 0) + 1
        scored = {h.id: best[h.id] for h in earlier if h.id in best}
        if choice is not None and choice not in scored:
            scored[choice] = (0.0, 0.0, 1.0)
        if not scored:
            scored = {h.id: (0.0, 0.0, 1.0) for h in earlier}
        mid = sorted(s[0] for s in scored.values())[len(scored) // 2]
        weights = {}
        for hid in sorted(scored, key=lambda x: int(x[1:])):
            s, _, timr = scored[hid]
            n = children.get(hid, 0)
            weights[hid] = {"score": s, "timr": timr, "children": n,
                            "weight": 1 / (1 + math.exp(-10 * (s - mid))) / (1 + n)}
        ids = list(weights)
        proposed = self.rng.choices(ids, weights=[weights[i]["weight"] for i in ids])[0]
        if status == "overridden" and choice == proposed:
            status = "approved"
        if status in ("auto", "approved"):
            proposed = choice if choice is not None else proposed
        why = f"sampled {proposed} by sigmoid(score - median) / (1 + children), seed {self.seed}"
        return self._decision(r, "curate", "parents", ids, {"weights": weights}, proposed,
                              choice if choice is not None else proposed, why, status)

    def _inheritance_decision(self, r, h: Harness, choice, status) -> int:
        cands = [c for c in self.checkpoints if c.kind != "base" and (c.round or 0) < r]
        task = self.tasks[0]
        probe = {}
        for c in cands:
            p, q = mismatch_rate(h, c), correct_rate(h, c, task)
            probe[c.id] = {"score": round(min(1.0, max(0.0, (1 - p) * q + 0.1 * (self.rng.random() - 0.5))), 4),
                           "timr": round(min(1.0, max(0.0, p + 0.05 * (self.rng.random() - 0.5))), 4), "n": 8}
        ranked = sorted(probe, key=lambda x: (-probe[x]["score"], probe[x]["timr"]))
        for cid in ranked[:2]:
            probe[cid]["n"] = 24     # the contenders got the whole probe set
        if choice is not None and status in ("auto", "approved"):
            # the engine chose it, so the evidence must show it on top
            top = probe[ranked[0]]
            probe[choice] = {"score": round(min(1.0, top["score"] + 0.02), 4), "timr": top["timr"], "n": 24}
            proposed = choice
        else:
            proposed = ranked[0] if ranked[0] != choice else (ranked[1] if len(ranked) > 1 else ranked[0])
            if choice == proposed:
                status = "approved" if status == "overridden" else status
        top = probe[proposed]
        why = (f"{proposed} fits harness {h.spec['name']} best: score {top['score']:.3f}, TIMR {top['timr']:.1%} "
               f"on {top['n']} probe tasks")
        # the evidence as the real `select` policy stores it: {"policy", "probe": {checkpoint: score, timr, n}}
        return self._decision(r, "inherit", "inheritance", [c.id for c in cands], {"policy": "select", "probe": probe},
                              proposed, choice if choice is not None else proposed, why, status)


def job_rows(rounds: int, files_dir: Path, harnesses, checkpoints, results, task: str, waiting: int | None):
    """A few jobs in every state, with the kinds, arguments, progress messages and results of engine.jobs."""
    r = rounds + 1
    h, c = harnesses[-1].id, checkpoints[-1]
    sft = next((ck for ck in reversed(checkpoints) if ck.kind == "sft"), c)
    last = results[-1] if results else (None, h, c.id, task, "dev", None, 0.0, 0.0)
    logs = files_dir / "logs"
    rows = [  # kind, args, state, progress, total, message, result, error, started, finished (s into the round)
        ("eval", {"harness": last[1], "checkpoint": last[2], "task": last[3], "split": last[4], "limit": None},
         "done", 50, 50, "50/50 episodes", {"evaluation": last[0], "score": last[6], "timr": last[7]}, None, 60, 400),
        ("sft", {"checkpoint": sft.parents[0][0], "harness": sft.harness_id, "dataset": sft.dataset_id,
                 "profile": "cpu", "seed": 0}, "done", 1, 1, f"registered {sft.id} {sft.name}", {"checkpoint": sft.id},
         None, 600, 2400),
        ("merge", {"models": [ck.id for ck in checkpoints[-3:-1]], "base": None, "density": 0.5}, "failed", 0, 1,
         "merging into merge-job", None, "mergekit: tensor model.layers.0.mlp.up_proj.weight has shape [512, 128] "
         "in one model and [512, 256] in another", 2500, 2560),
        ("eval", {"harness": h, "checkpoint": "c2", "task": task, "split": "test", "limit": None}, "failed", 12, 50,
         "12/50 episodes", None, "Traceback (most recent call last):\n  File \"engine/evaluate.py\", line 37, in "
         "run_evaluation\nRuntimeError: worker exited with signal 9 (out of memory)", 2600, 2900),
        ("round", {"rounds": 1, "gate": "require"}, "done", 0, 6, "round: curate",
         {"waiting": waiting} if waiting else {"rounds": []}, None, 2950, 3000),
        ("sft", {"checkpoint": c.id, "harness": h, "dataset": sft.dataset_id, "profile": "cpu", "seed": 0},
         "cancelled", 0, 1, "training sft-job (profile cpu; ms-swift logs to its train.log)", None, None, 3050, 3150),
        ("eval", {"harness": h, "checkpoint": c.id, "task": task, "split": "dev", "limit": None}, "running", 18, 50,
         "18/50 episodes", None, None, 3300, None),
        ("round", {"rounds": 2}, "running", 2, 6, f"round {r}: inherit", None, None, 3350, None),
        ("eval", {"harness": "h1", "checkpoint": c.id, "task": task, "split": "dev", "limit": None}, "queued", 0,
         None, "", None, None, None, None),
    ]
    for i, (kind, args, state, prog, total, msg, result, error, start, end) in enumerate(rows):
        created = at(r, (3400 if start is None else start) - 30)     # queued a little before it started
        started = None if start is None else at(r, start)
        finished = None if end is None else at(r, end)
        yield dict(id=i + 1, kind=kind, args=json.dumps(args), state=state, progress=prog, total=total, message=msg,
                   log_path=str(logs / f"job-{i + 1}.log"), pid=None,
                   result=None if result is None else json.dumps(result), error=error, created_at=created,
                   started_at=started, finished_at=finished)


