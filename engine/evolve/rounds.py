"""Rounds of co-evolution: curate -> edit -> inherit -> sample -> sft -> evaluate.

Each step's result is stored in `round_steps` in the same transaction as the rows it writes, so a
round killed at any point resumes at the first unfinished step and never writes a row twice.
Decisions (parents, inheritance) pass an approval gate: `auto` settles them at once, `require`
leaves them pending until a person approves or overrides them."""
from __future__ import annotations

import dataclasses
import random
import time
from typing import Callable


from engine.archive import Archive
from engine.checkpoints import SftRequest, register, train
from engine.errors import CoevoError, InputError
from engine.evaluate import run_evaluation, task_dir
from engine.evolve.acceptance import ACCEPTANCE
from engine.evolve.curator import parent_weights, pick_parent
from engine.evolve.editors import get_editor
from engine.evolve.editors.llm import EditorError
from engine.evolve.inheritance import POLICIES, InheritContext, probe, read_probe
from engine.evolve import steering
from engine.executors import get_executor, rollout_job, step_key
from engine.evolve.sampling import rejection_sample, with_replay
from engine.harness.spec import HarnessSpec, edited_name
from engine.models import load_backend
from engine.run_config import MODES, STEPS, RunConfig
from engine.tasks import get_task



class Waiting(Exception):
    """A decision is pending a person's approval."""

    def __init__(self, decision_id: int):
        self.decision_id = decision_id
        super().__init__(f"decision {decision_id} is waiting: `coevo approve {decision_id}` or "
                         f"`coevo override {decision_id} --choice ...`")


class RoundRunner:
    def __init__(self, archive: Archive, cfg: RunConfig, log: Callable[[str], None] = print,
                 on_step: Callable[[int, str], None] | None = None,
                 on_pause: Callable[[dict | None], None] | None = None, poll_s: float = 1.0):
        """`on_step(round id, step)` is called as each step is done (or found done on a resume);
        `on_pause(act)` when the run stops at a person's pause (with None when it goes on)."""
        self.archive, self.cfg, self.log, self.on_step = archive, cfg, log, on_step
        self.on_pause, self.poll_s = on_pause, poll_s
        self.mode = MODES[cfg.mode]
        self.task = get_task(cfg.task, task_dir(archive, cfg.task))
        unknown = sorted(set(cfg.fixed_task_options) - set(self.task.option_space))
        if unknown:
            raise InputError(f"{unknown} are not task options of {cfg.task} (it has {sorted(self.task.option_space)})",
                             field="fixed_task_options")
        self.start_harness = archive.harness(cfg.start_harness)["id"]
        self.start_checkpoint = archive.checkpoint(cfg.start_checkpoint)["id"]
        self.backends: dict = {}  # checkpoint id -> loaded model, from probing to sampling within a round
        self.executor = get_executor(cfg.executor, archive.files_dir)  # None: this machine does the work

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, rounds: int) -> list[dict]:
        """Run until `rounds` rounds are done in this archive; raises Waiting at a pending decision."""
        while len([r for r in self.archive.rounds() if r["state"] == "done"]) < rounds:
            self.wait_while_paused("before a new round")
            rnd = self.archive.open_round(self.cfg.mode, self.cfg.model_dump(mode="json"))
            self.run_round(rnd["id"])
        return self.summary()

    def run_round(self, rid: int) -> dict:
        results = {}
        for step in STEPS:
            done = self.archive.step_result(rid, step)
            if done is None:
                self.wait_while_paused(f"round {rid} before {step}")
                t0 = time.time()
                self.log(f"[round {rid}] {step} ...")
                done = getattr(self, f"_{step}")(rid, results)
                self.log(f"[round {rid}] {step} done in {time.time() - t0:.1f}s: {_brief(done)}")
            results[step] = done
            if self.on_step:
                self.on_step(rid, step)
        self.backends.clear()
        self.archive.finish_round(rid)
        ev = results["evaluate"]
        self.log(f"[round {rid}] {ev['harness']} x {ev['checkpoint']}: score {ev['score']:.3f}  TIMR {ev['timr']:.1%}")
        return results

    def summary(self) -> list[dict]:
        return [dict(round=r["id"], mode=r["mode"], **(self.archive.step_result(r["id"], "evaluate") or {}))
                for r in self.archive.rounds() if r["state"] == "done"]

    def wait_while_paused(self, where: str) -> None:
        """A step boundary: while a person's pause is in force, wait (polling the archive) for a resume."""
        act = steering.paused(self.archive)
        if act is None:
            return
        self.log(f"[{where}] paused by {act['decided_by']}"
                 + (f" ({act['comment']})" if act["comment"] else "") + ": waiting for `coevo resume`")
        if self.on_pause:
            self.on_pause(act)
        while steering.paused(self.archive):
            time.sleep(self.poll_s)
        self.log(f"[{where}] resumed")
        if self.on_pause:
            self.on_pause(None)

    # -- steps ------------------------------------------------------------------------------------
    def _curate(self, rid, results) -> dict:
        if not self.mode["edit"]:
            return self._finish(rid, "curate", {"parents": [self.start_harness], "why": "the harness is fixed"})
        candidate = steering.next_harness(self.archive, self.cfg.task)
        if candidate is not None:  # a person's harness: its own parents, no sampling
            parents = candidate["evidence"].get("parents") or [candidate["choice"]]
            return self._finish(rid, "curate", {"parents": parents, "steer": candidate["id"],
                                                "why": f"harness {candidate['choice']} entered by "
                                                       f"{candidate['decided_by']}"})
        decision = self.archive.step_decision(rid, "curate")
        if decision is None:
            rng = random.Random(f"{self.cfg.seed}-{rid}-curate")
            weights = parent_weights(self.archive, self.cfg.task, self.cfg.split)
            if not weights:
                raise CoevoError("no evaluated harness to curate from: run `coevo run` (it evaluates the seeds)")
            choice = pick_parent(weights, rng)
            decision = self._decide(rid, "curate", "parents", sorted(weights), {"weights": weights}, choice,
                                    f"sampled {choice} by sigmoid(score - median) / (1 + children), seed "
                                    f"{self.cfg.seed}")
        return self._finish(rid, "curate", {"parents": [self._settled(decision)], "decision": decision["id"]})

    def _edit(self, rid, results) -> dict:
        parent_id = results["curate"]["parents"][0]
        if not self.mode["edit"]:
            return self._finish(rid, "edit", {"harness": parent_id, "why": "the harness is fixed"})
        if results["curate"].get("steer"):
            act = self.archive.decision(results["curate"]["steer"])
            with self.archive.transaction():
                self.archive.apply_steering(act["id"], rid)
                return self._finish(rid, "edit", {"harness": act["choice"], "operator": "person",
                                                  "rationale": act["comment"] or f"entered by {act['decided_by']}",
                                                  "steer": act["id"]})
        parent = self.archive.harness(parent_id)
        rng = random.Random(f"{self.cfg.seed}-{rid}-edit")
        kw = dict(rng=rng, successes=self.archive.successes(parent_id),
                  scores=self.archive.best_scores(self.cfg.task, self.cfg.split).get(parent_id, {}),
                  failures=self.archive.failures(parent_id), llm=self.cfg.llm,
                  fixed_task_options=self.cfg.fixed_task_options)
        refused = None
        try:
            edit = get_editor(self.cfg.editor)(parent, **kw)
        except EditorError as e:
            refused = str(e)
            self.log(f"[round {rid}] editor {self.cfg.editor} refused: {refused}; falling back to offline")
            edit = get_editor("offline")(parent, **kw)
        spec = HarnessSpec.from_dict({**edit.spec, "name": parent["spec"]["name"]}).to_dict()
        spec["name"] = edited_name(parent["spec"], spec, f"r{rid}")
        creator = f"editor:{self.cfg.editor if refused is None else 'offline'}"
        with self.archive.transaction():
            if refused:
                self.archive.add_decision(round_id=rid, step="edit", kind="edit", candidates=[self.cfg.editor],
                                          evidence={"error": refused}, choice="offline", status="auto",
                                          rationale=f"{self.cfg.editor} editor reply refused: {refused}",
                                          decided_by="engine")
            hid = self.archive.add_harness(spec, creator=creator, rationale=edit.rationale, parents=[parent_id],
                                           round=rid)
            return self._finish(rid, "edit", {"harness": hid, "operator": edit.operator, "rationale": edit.rationale,
                                              "refused": refused})

    def _inherit(self, rid, results) -> dict:
        decision = self.archive.step_decision(rid, "inherit")
        pinned = steering.next_pin(self.archive) if decision is None else None
        if pinned is not None:  # a person chose: a settled decision, the pin (and any it replaced) taken
            with self.archive.transaction():
                did = self.archive.add_decision(
                    round_id=rid, step="inherit", kind="inheritance", candidates=[pinned["choice"]],
                    evidence={"policy": "pin", "pin": pinned["id"]}, choice=pinned["choice"],
                    rationale=f"pinned by {pinned['decided_by']}", status="overridden",
                    decided_by=pinned["decided_by"], comment=pinned["comment"])
                for act in self.archive.steering(("pin",), unapplied=True):
                    self.archive.apply_steering(act["id"], rid)
                return self._finish(rid, "inherit", {"checkpoint": pinned["choice"], "decision": did})
        if decision is None:
            hid = results["edit"]["harness"]
            spec = HarnessSpec.from_dict(self.archive.harness(hid)["spec"])
            ctx = InheritContext(self.archive, spec, self.task, self.task.load(self.cfg.split)[:self.cfg.probe.items],
                                 latest=self._latest(rid), start=self.start_checkpoint, round=rid,
                                 stage1=self.cfg.probe.stage1, contenders=self.cfg.probe.contenders,
                                 backend_cache=self.backends, backend=self.cfg.backend, harness_id=hid,
                                 split=self.cfg.split, excluded=steering.excluded(self.archive))
            policy = self.mode["inherit"] or self.cfg.inheritance
            p = POLICIES.get(policy)(ctx)
            evidence, choice, rationale, cands = {"policy": policy, **p.evidence}, p.choice, p.rationale, p.candidates
            acceptance = self._judge_edit(results, ctx, p)
            if acceptance:
                evidence["acceptance"] = acceptance
                if not acceptance["accepted"]:
                    choice, cands = acceptance["parent_checkpoint"], list(dict.fromkeys(cands + [choice]))
                    rationale = (f"edit rejected: {acceptance['parent']} x {choice} probes better than "
                                 f"{hid} x {p.choice} on the same items{_odds(acceptance)}; the round goes on "
                                 f"with the parent pair")
                elif "test" in acceptance:
                    rationale += f"; the edit stands against its parent pair{_odds(acceptance)}"
            decision = self._decide(rid, "inherit", "inheritance", cands, evidence, choice, rationale)
        result = {"checkpoint": self._settled(decision), "decision": decision["id"]}
        acceptance = decision["evidence"].get("acceptance")
        if acceptance and not acceptance["accepted"]:
            result["harness"] = acceptance["parent"]  # the later steps work on the parent harness
        return self._finish(rid, "inherit", result)

    def _judge_edit(self, results, ctx: InheritContext, proposal) -> dict | None:
        """Unless `accept_edit: always`, the edited harness with the checkpoint it inherits against its parent
        harness with the parent's best checkpoint, probed on the same items and judged by the acceptance
        rule (engine.evolve.acceptance). None where there is nothing to judge: a person's harness, a policy
        that does not probe, a parent never evaluated or its checkpoint excluded."""
        edit = results["edit"]
        if self.cfg.accept_edit == "always" or edit.get("operator") in (None, "person"):
            return None
        new = proposal.evidence.get("probe", {}).get(proposal.choice)
        parent = results["curate"]["parents"][0]
        best = self.archive.best_scores(self.cfg.task, self.cfg.split).get(parent)
        if new is None or best is None or best["checkpoint_id"] in ctx.excluded:
            return None
        pctx = dataclasses.replace(ctx, spec=HarnessSpec.from_dict(self.archive.harness(parent)["spec"]),
                                   harness_id=parent)
        old = read_probe(pctx, self.archive.evaluation(best["id"]), ctx.probe_items) \
            or probe(pctx, best["checkpoint_id"], ctx.probe_items)
        verdict = ACCEPTANCE.get(self.cfg.accept_edit)(self.archive, old, new, self.cfg.edit_alpha)
        return {**verdict, "rule": self.cfg.accept_edit, "parent": parent, "parent_checkpoint": best["checkpoint_id"],
                "parent_probe": old, "edited_probe": new}

    @staticmethod
    def _harness(results) -> str:
        """The harness a round works on: the edited one, or its parent where the edit was rejected."""
        return results["inherit"].get("harness") or results["edit"]["harness"]

    def _sample(self, rid, results) -> dict:
        if not self.mode["train"]:
            return self._finish(rid, "sample", {"dataset": None, "kept": 0, "why": "the model is fixed"})
        hid, cid = self._harness(results), results["inherit"]["checkpoint"]
        spec = HarnessSpec.from_dict(self.archive.harness(hid)["spec"])
        train = self.task.load("train")
        items = random.Random(f"{self.cfg.seed}-{rid}-sample").sample(train, min(self.cfg.sample.tasks, len(train)))
        root = self.executor.root if self.executor else self.archive.files_dir
        path = root / "data" / f"round{rid}-{hid}-{cid}.jsonl"
        if self.executor:  # a remote job writes the data set under the shared storage root
            self.backends.clear()
            job = rollout_job("sample", spec=spec.to_dict(), task=self.cfg.task, data_dir=self.task.data_dir,
                              split="train", checkpoint=self.archive.checkpoint(cid)["path"],
                              backend=self.cfg.backend.model_dump(), item_ids=[it.id for it in items],
                              k=self.cfg.sample.k, temperature=self.cfg.sample.temperature, out=str(path),
                              max_share=self.cfg.sample.max_share, constrain=self.cfg.sample.constrain,
                              seed=self.cfg.seed + rid)
            counts = self.executor.run(job, key=step_key(self.archive.path, f"r{rid}", "sample"),
                                       gpus=self.cfg.executor.eval_gpus, log=self.log)
            label = counts.pop("backend", None) or self.cfg.backend.label()  # what the worker ran
            if not path.exists():
                raise CoevoError(f"the remote sampling job wrote no data set at {path}")
        else:
            backend = self.backends.get(cid) or load_backend(self.cfg.backend, self.archive.checkpoint(cid)["path"])
            self.backends.clear()  # the probed models are no longer needed
            backend.seed = self.cfg.seed + rid
            counts = rejection_sample(spec, self.task, backend, items, k=self.cfg.sample.k,
                                      temperature=self.cfg.sample.temperature, out_path=path,
                                      max_share=self.cfg.sample.max_share, constrain=self.cfg.sample.constrain)
            label = self.cfg.backend.label()
        replayed = 0
        if self.cfg.sample.replay:
            taken = {it.id for it in items}
            rest = [it for it in train if it.id not in taken]
            gold_items = random.Random(f"{self.cfg.seed}-{rid}-replay").sample(rest, min(self.cfg.sample.replay,
                                                                                         len(rest)))
            replay_path = path.with_name(path.stem + "+gold.jsonl")
            replayed = with_replay(path, spec, self.task, gold_items, replay_path)
            path = replay_path
        with self.archive.transaction():
            did = self.archive.add_dataset(path=path, task=self.cfg.task, source="rejection", harness_id=hid,
                                           checkpoint_id=cid, meta={"k": self.cfg.sample.k, "round": rid,
                                                                    "temperature": self.cfg.sample.temperature,
                                                                    "max_share": self.cfg.sample.max_share,
                                                                    "constrained": self.cfg.sample.constrain and
                                                                    spec.sampling.constrain_calls,
                                                                    "replayed": replayed,
                                                                    "backend": label,
                                                                    "executor": self.cfg.executor.kind},
                                           **counts)
            return self._finish(rid, "sample", {"dataset": did, **counts, "replayed": replayed})

    def _sft(self, rid, results) -> dict:
        cid = results["inherit"]["checkpoint"]
        sample = results["sample"]
        if not self.mode["train"] or sample["kept"] < max(1, self.cfg.sample.min_kept):
            why = ("the model is fixed" if not self.mode["train"] else
                   f"{sample['kept']} verified successes, fewer than sample.min_kept={self.cfg.sample.min_kept}")
            return self._finish(rid, "sft", {"checkpoint": cid, "trained": False, "why": why})
        hid = self._harness(results)
        (built,) = train(self.archive, [SftRequest(cid, sample["dataset"], f"sft-r{rid}", self.cfg.profile,
                                                  self.cfg.seed + rid, harness=hid)], executor=self.executor,
                         log=self.log)
        with self.archive.transaction():
            new = register(self.archive, built, round=rid)
            return self._finish(rid, "sft", {"checkpoint": new, "trained": True})

    def _evaluate(self, rid, results) -> dict:
        hid, cid = self._harness(results), results["sft"]["checkpoint"]
        record, eps, turns = run_evaluation(self.archive, hid, cid, self.cfg.task, self.cfg.split,
                                            limit=self.cfg.eval_limit, round=rid, backend_spec=self.cfg.backend,
                                            executor=self.executor)
        with self.archive.transaction():
            eid = self.archive.add_evaluation(record, eps, turns)
            return self._finish(rid, "evaluate", {"evaluation": eid, "harness": hid, "checkpoint": cid,
                                                  "score": record["score"], "timr": record["timr"]})

    # -- helpers ----------------------------------------------------------------------------------
    def _finish(self, rid, step, result) -> dict:
        self.archive.finish_step(rid, step, result)
        return result

    def _decide(self, rid, step, kind, candidates, evidence, choice, rationale) -> dict:
        auto = self.cfg.gate == "auto"
        did = self.archive.add_decision(round_id=rid, step=step, kind=kind, candidates=candidates, evidence=evidence,
                                        choice=choice, rationale=rationale, status="auto" if auto else "proposed",
                                        decided_by="engine" if auto else None)
        return self.archive.decision(did)

    def _settled(self, decision) -> str:
        if decision["status"] == "proposed":
            raise Waiting(decision["id"])
        return decision["choice"]

    def _latest(self, rid) -> str:
        """The newest checkpoint this run produced before round rid (the start before any)."""
        for r in reversed([r for r in self.archive.rounds() if r["id"] < rid]):
            done = self.archive.step_result(r["id"], "sft")
            if done:
                return done["checkpoint"]
        return self.start_checkpoint


def _odds(acceptance: dict) -> str:
    """The sign test behind an acceptance verdict, in words; empty for a rule without one."""
    t = acceptance.get("test")
    return (f" (item by item {t['parent_wins']}:{t['edited_wins']} for the parent, sign test mid-p={t['p']:.3f})"
            if t else "")


def _brief(result: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in result.items() if k not in ("rationale",) and v is not None)[:160]
