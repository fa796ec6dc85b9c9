"""Scoring prediction files against gold files with a benchmark's official metric."""
from __future__ import annotations

from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl, require
from engine.tasks.smart_home.data import load_rows
from engine.tasks.smart_home.scorer import score_rows


def score_homebench_files(gold_path, pred_path) -> dict:
    """PRED rows are {"id", "output"} with output in the gold's operation-string format; a gold row
    without a prediction counts as an empty answer."""
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
