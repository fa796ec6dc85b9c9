"""Who&When's metrics: agent-level and step-level accuracy over all gold traces; a trace with no
prediction counts as wrong.

Two match rules. `exact`: the predicted agent name equals the gold one and the predicted step index
equals the gold one. `substring`: the official script's rule (`actual_agent in predicted_agent`,
`actual_step in predicted_step`, both as strings): a hit whenever the gold is a substring of the
prediction, so gold step 1 also matches a predicted 12. It is kept for comparability with published
numbers, and every result says which rule made it.

Traces whose label cannot be used are not scored: they are left out of n and listed under `rejected`
(the official script would count them as misses in its denominator).
"""
from __future__ import annotations

from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl, require
from engine.tasks.failure_attribution.traces import Trace, load_traces

RULES = ("exact", "substring")


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise InputError(f"unknown match rule {rule!r} (known: {', '.join(RULES)})", field="rule")
    return rule


def hits(gold_agent: str, gold_step: int, prediction: dict | None, rule: str = "exact") -> tuple[bool, bool]:
    """(agent correct, step correct) of one prediction {"agent", "step"} (None: no prediction)."""
    if not prediction:
        return False, False
    agent, step = prediction.get("agent"), prediction.get("step")
    if rule == "substring":
        return (agent is not None and str(gold_agent) in str(agent),
                step is not None and str(gold_step) in str(step))
    return (isinstance(agent, str) and agent.strip() == gold_agent.strip(),
            isinstance(step, int) and not isinstance(step, bool) and step == gold_step)


def accuracy(rows: list[tuple[str, int, dict | None]], rule: str = "exact") -> dict:
    """{"n", "agent_accuracy", "step_accuracy"} over (gold agent, gold step, prediction) rows."""
    n = len(rows)
    marks = [hits(a, s, p, rule) for a, s, p in rows]
    return {"n": n,
            "agent_accuracy": sum(m[0] for m in marks) / n if n else 0.0,
            "step_accuracy": sum(m[1] for m in marks) / n if n else 0.0}


def grouped(rows: list[tuple[str, int, dict | None]], groups: list[str], rule: str = "exact") -> tuple[dict, dict]:
    """(overall, {group: metrics}) with the groups in first-seen order."""
    by: dict[str, list] = {}
    for row, g in zip(rows, groups, strict=True):
        by.setdefault(g, []).append(row)
    return accuracy(rows, rule), {g: accuracy(r, rule) for g, r in by.items()}


def score_traces(traces: list[Trace], predictions: dict[str, dict], rule: str = "exact") -> dict:
    """Score {trace id: {"agent", "step"}} against gold traces; ids not among them are reported."""
    check_rule(rule)
    known = {t.id for t in traces}
    rows = [(t.mistake_agent, t.mistake_step, predictions.get(t.id)) for t in traces]
    overall, by_sub = grouped(rows, [t.subfolder for t in traces], rule)
    return {"rule": rule, "overall": overall, "by_subfolder": by_sub,
            "unknown_ids": sorted(i for i in predictions if i not in known)}


def read_predictions(path) -> dict[str, dict]:
    """PRED.jsonl rows {"id": "Algorithm-Generated/17", "agent": str, "step": 0-based int}."""
    path = Path(path)
    preds: dict[str, dict] = {}
    for line, obj in read_jsonl(path):
        tid = require(obj, "id", str, path=path, line=line)
        agent = require(obj, "agent", str, path=path, line=line)
        step = require(obj, "step", int, path=path, line=line)
        if isinstance(step, bool):
            raise InputError("expected int, got bool", path=path, line=line, field="step")
        tid = tid.removesuffix(".json")  # the official files name traces by file name
        if tid in preds:
            raise InputError(f"a second prediction for {tid!r}", path=path, line=line, field="id")
        preds[tid] = {"agent": agent, "step": step}
    return preds


def score_whowhen(gold_dir, pred_path, rule: str = "exact") -> dict:
    """Score PRED.jsonl against the Who&When (or TraceElephant) traces under gold_dir:
    {"rule", "overall": {"n", "agent_accuracy", "step_accuracy"}, "by_subfolder": {...},
     "unknown_ids": [...], "rejected": ["id: reason", ...]}."""
    check_rule(rule)
    traces, rejected = load_traces(gold_dir)
    if not traces:
        raise InputError("no usable traces" + (f" ({len(rejected)} rejected)" if rejected else ""), path=gold_dir)
    preds = read_predictions(pred_path)
    result = score_traces(traces, preds, rule)
    rejected_ids = {r.id for r in rejected}
    # a prediction for a rejected trace is not for an unknown one: it is listed with the rejected
    result["unknown_ids"] = [i for i in result["unknown_ids"] if i not in rejected_ids]
    result["rejected"] = [str(r) for r in rejected]
    return result
