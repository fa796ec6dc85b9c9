"""HomeBench's official metric: success = predicted and gold operation lists equal as multisets;
precision, recall and F1 pooled over the rows of a category; per category and overall."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl, require

CATEGORIES = ("VS", "IS", "VM", "IM", "MM")


def category(row_type: str) -> str:
    """HomeBench `type` -> its category."""
    if row_type == "normal":
        return "VS"
    if row_type in ("unexist_device", "unexist_attribute"):
        return "IS"
    if row_type.startswith("multi"):
        if row_type.endswith("_normal"):
            return "VM"
        if row_type.endswith("_mix"):
            return "MM"
        if "_unexist" in row_type:
            return "IM"
    raise ValueError(f"unknown HomeBench type {row_type!r}")


def parse_operations(output) -> list[str]:
    """`'''a.b.c(1),error_input,'''` -> ['a.b.c(1)', 'error_input']; commas inside (...) do not split."""
    if output is None:
        return []
    if isinstance(output, (list, tuple)):
        return [str(o).strip() for o in output if str(o).strip()]
    text = str(output).strip()
    if text.startswith("'''"):
        text = text[3:]
    if text.endswith("'''"):
        text = text[:-3]
    ops, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            ops.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    ops.append("".join(cur))
    return [_normalize(o) for o in ops if o.strip()]


def _normalize(op: str) -> str:
    return "".join(op.split())  # the official files vary in spacing only


def format_operations(ops: list[str]) -> str:
    """Operations in the official output-string format."""
    return "'''" + "".join(op + "," for op in ops) + "'''"


def score_rows(golds: list, preds: list, categories: list[str]) -> dict:
    """Metrics per category and overall. `golds`/`preds` are output strings or operation lists."""
    buckets: dict[str, list] = {c: [] for c in CATEGORIES}
    rows = []
    for g, p, c in zip(golds, preds, categories, strict=True):
        g_ops, p_ops = Counter(parse_operations(g)), Counter(parse_operations(p))
        row = (g_ops == p_ops, sum((g_ops & p_ops).values()), sum(p_ops.values()), sum(g_ops.values()))
        buckets[c].append(row)
        rows.append(row)
    out = {c: _pool(r) for c, r in buckets.items()}
    out["overall"] = _pool(rows)
    return out


def _pool(rows: list) -> dict:
    n = len(rows)
    tp = sum(r[1] for r in rows)
    n_pred = sum(r[2] for r in rows)
    n_gold = sum(r[3] for r in rows)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if n == 0:  # a category absent from the data has no score, not a zero
        return {"n": 0, "success": None, "precision": None, "recall": None, "f1": None}
    return {"n": n, "success": sum(r[0] for r in rows) / n, "precision": precision, "recall": recall, "f1": f1}


def score_homebench_files(gold_path, pred_path) -> dict:
    """PRED rows are {"id", "output"} with output in the gold's operation-string format; a gold row
    without a prediction counts as an empty answer."""
    from engine.tasks.smart_home.data import load_rows  # data imports `category` from here
    gold = load_rows(gold_path)
    known = {r.id for r in gold}
    preds: dict[str, str] = {}
    pred_path = Path(pred_path)
    for line, obj in read_jsonl(pred_path):
        rid = require(obj, "id", str, path=pred_path, line=line)
        output = require(obj, "output", str, path=pred_path, line=line)
        if rid not in known:
            raise InputError(f"id {rid!r} is not in {gold_path}", path=pred_path, line=line, field="id")
        if rid in preds:
            raise InputError(f"duplicate prediction for {rid!r}", path=pred_path, line=line, field="id")
        preds[rid] = output
    return score_rows([r.output for r in gold], [preds.get(r.id, "") for r in gold], [r.category for r in gold])
