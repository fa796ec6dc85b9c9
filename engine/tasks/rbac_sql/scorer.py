"""Scoring role-aware text-to-SQL.

A prediction is a decision: `refuse` (the model says the role may not answer) or `sql` (it answers).
SQL that the guard then denies is still an answer, so a wrong decision; it is not a false permit
because nothing was read.

    decision_accuracy   right decision (PERMIT row answered with SQL, DENY row refused) / rows
    refusal_precision   refused DENY rows / refused rows          (positive class: DENY; None if undefined)
    refusal_recall      refused DENY rows / DENY rows
    refusal_f1
    false_permit_rate   DENY rows answered with SQL that the guard ran and that returned rows / DENY rows
    execution_accuracy  over PERMIT rows whose database holds data: the predicted SQL, run under the role
                        through the guard, returns the gold query's result (Spider's execution match:
                        rows as a multiset, in order only when the gold query has ORDER BY, columns in
                        any order); a refusal or an error is a miss
    success             the headline: rows fully right: DENY refused; PERMIT answered with SQL the guard
                        runs and, where the database holds data, with the gold result (an empty
                        database built from the DDL can only check that the role may run it)
A gold row without a prediction counts as wrong on every metric.
"""
from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl
from engine.tasks.rbac_sql.data import Row, load_rows
from engine.tasks.rbac_sql.database import open_database
from engine.tasks.rbac_sql.guard import GuardError, QueryResult, run_guarded

SCORE_MAX_ROWS = 10_000


def _multiset(rows) -> Counter:
    return Counter(map(_hashable, rows))


def _hashable(row):
    return tuple(repr(v) if isinstance(v, (list, dict)) else v for v in row)


def result_eq(gold: list[tuple], pred: list[tuple], order_matters: bool) -> bool:
    """Spider's execution match (test-suite-sql-eval's `result_eq`): the same rows, as a multiset unless
    order matters, allowing the predicted columns in another order."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    ncols = len(gold[0])
    if any(len(r) != ncols for r in pred):
        return False
    gold_cols = [Counter(_hashable((r[i],)) for r in gold) for i in range(ncols)]
    pred_cols = [Counter(_hashable((r[j],)) for r in pred) for j in range(ncols)]
    # candidate predicted columns for each gold column: the same values
    options = [[j for j in range(ncols) if pred_cols[j] == gold_cols[i]] for i in range(ncols)]
    if any(not o for o in options):
        return False
    gold_ms = None if order_matters else _multiset(gold)
    for perm in itertools.islice(itertools.product(*options), 10_000):
        if len(set(perm)) != ncols:
            continue
        permuted = [tuple(r[j] for j in perm) for r in pred]
        if order_matters:
            if [_hashable(r) for r in permuted] == [_hashable(r) for r in gold]:
                return True
        elif _multiset(permuted) == gold_ms:
            return True
    return False


def order_matters(gold_sql: str) -> bool:
    return "order by" in " ".join(gold_sql.lower().split())


def _run(row: Row, sql: str, spider_dir) -> QueryResult | None:
    db = open_database(row.db_id, row.schema_ddl, spider_dir)
    try:
        return run_guarded(db, row.grants, sql, max_rows=SCORE_MAX_ROWS)
    except GuardError:
        return None


_UNSET = object()


def judge_row(row: Row, pred: dict | None, spider_dir=None, *, gold_result=_UNSET, pred_result=_UNSET) -> dict:
    """One row's verdict: {decision, correct_decision, ran, returned_rows, exec_match (None: not
    checked), success}. `gold_result` / `pred_result` (a QueryResult, or None for SQL the guard
    refused) save running a query again."""
    decision = None
    if isinstance(pred, dict):
        if pred.get("refuse") is True:
            decision = "DENY"
        elif isinstance(pred.get("sql"), str):
            decision = "PERMIT"
    out = {"decision": decision, "correct_decision": decision == row.decision, "ran": False,
           "returned_rows": False, "exec_match": None, "success": False}
    result = None
    if decision == "PERMIT":
        result = _run(row, pred["sql"], spider_dir) if pred_result is _UNSET else pred_result
        out["ran"] = result is not None
        out["returned_rows"] = bool(result and result.rows)
    if row.decision == "PERMIT" and open_database(row.db_id, row.schema_ddl, spider_dir).has_data:
        gold = _run(row, row.query, spider_dir) if gold_result is _UNSET else gold_result
        if gold is not None:  # a gold query the guard refuses is not a row execution can check
            out["exec_match"] = result is not None and result.truncated == gold.truncated and \
                result_eq(gold.rows, result.rows, order_matters(row.query))
    if row.decision == "DENY":
        out["success"] = decision == "DENY"
    else:
        out["success"] = out["ran"] and out["exec_match"] is not False
    return out


def aggregate(rows: list[Row], verdicts: list[dict]) -> dict:
    """The metrics over rows' verdicts (judge_row)."""
    n = len(rows)
    deny = [v for r, v in zip(rows, verdicts) if r.decision == "DENY"]
    permit = [v for r, v in zip(rows, verdicts) if r.decision == "PERMIT"]
    tp = sum(v["decision"] == "DENY" for v in deny)
    refused = sum(v["decision"] == "DENY" for v in verdicts)
    precision = tp / refused if refused else None
    recall = tp / len(deny) if deny else None
    f1 = None
    if precision is not None and recall is not None:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    checked = [v for v in permit if v["exec_match"] is not None]
    return {
        "n": n,
        "permit_rows": len(permit),
        "deny_rows": len(deny),
        "success": sum(v["success"] for v in verdicts) / n if n else None,
        "decision_accuracy": sum(v["correct_decision"] for v in verdicts) / n if n else None,
        "refusal_precision": precision,
        "refusal_recall": recall,
        "refusal_f1": f1,
        "false_permit_rate": sum(v["decision"] == "PERMIT" and v["returned_rows"] for v in deny) / len(deny)
        if deny else None,
        "execution_accuracy": sum(v["exec_match"] for v in checked) / len(checked) if checked else None,
        "execution_rows": len(checked),
        "answers_denied_by_guard": sum(v["decision"] == "PERMIT" and not v["ran"] for v in verdicts),
        "no_prediction": sum(v["decision"] is None for v in verdicts),
    }


def score_rbac(rows: list[Row], preds: list[dict | None], *, spider_dir=None) -> dict:
    """Metrics of predictions aligned with gold rows; a prediction is {"sql": ...}, {"refuse": true} or
    None (no prediction)."""
    if len(rows) != len(preds):
        raise ValueError(f"{len(rows)} gold rows but {len(preds)} predictions")
    return aggregate(rows, [judge_row(r, p, spider_dir) for r, p in zip(rows, preds)])


def read_predictions(pred_path, gold_rows: list[Row]) -> list[dict | None]:
    """PRED rows `{"line": <0-based line in the gold file>, "sql": "..."}` or `{"line": ..., "refuse": true}`,
    aligned with the gold rows (None where a gold row has no prediction)."""
    pred_path = Path(pred_path)
    by_index = {r.line - 1: i for i, r in enumerate(gold_rows)}
    preds: list[dict | None] = [None] * len(gold_rows)
    for line, obj in read_jsonl(pred_path):
        idx = obj.get("line")
        if "line" not in obj:
            raise InputError("missing field", path=pred_path, line=line, field="line")
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise InputError(f"expected an integer, got {type(idx).__name__}", path=pred_path, line=line,
                             field="line")
        if idx not in by_index:
            raise InputError(f"no gold row on 0-based line {idx}", path=pred_path, line=line, field="line")
        extra = set(obj) - {"line", "sql", "refuse"}
        if extra:
            raise InputError(f"unexpected field(s) {sorted(extra)}", path=pred_path, line=line,
                             field=sorted(extra)[0])
        has_sql, has_refuse = "sql" in obj, "refuse" in obj
        if has_sql == has_refuse:
            raise InputError("expected exactly one of sql or refuse", path=pred_path, line=line,
                             field="sql" if has_sql else "refuse")
        if has_sql and not isinstance(obj["sql"], str):
            raise InputError(f"expected a string, got {type(obj['sql']).__name__}", path=pred_path, line=line,
                             field="sql")
        if has_refuse and obj["refuse"] is not True:
            raise InputError("must be true", path=pred_path, line=line, field="refuse")
        i = by_index[idx]
        if preds[i] is not None:
            raise InputError(f"a second prediction for gold line {idx}", path=pred_path, line=line, field="line")
        preds[i] = {"sql": obj["sql"]} if has_sql else {"refuse": True}
    return preds


def score_rbac_files(gold_path, pred_path, spider_dir=None) -> dict:
    rows = load_rows(gold_path)
    return score_rbac(rows, read_predictions(pred_path, rows), spider_dir=spider_dir)
