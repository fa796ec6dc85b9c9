"""The role-aware text-to-SQL vertical (Spider-AC): the context is the database as the role sees it, an
answer is one call, `sql(query)` or `refuse(reason?)`, and the environment runs the SQL under the role
through the permission guard.

Data: `<data_dir>/<split>.jsonl` (or a path) in Spider-AC's format. The databases come from a Spider
folder, the first of `<data_dir>`, the split file's folder, or a `spider/` folder beside either of them
(the shared-data layout: `rbac_text2sql/` next to `spider/`) that holds `database/`; without one each
database is built, empty, from the rows' schema_ddl (execution is then checked only for running).

Task options (a harness's `task_options`):
    schema_view: role (default) | full   role: only the tables and columns the role may read;
                                         full: the whole schema_ddl and the role's GRANT statements
    show_role:   true (default) | false  name the role in the context
Headline score: `success`, the share of rows fully right (scorer.py): a DENY row refused, a PERMIT row
answered with SQL the guard runs that returns the gold result.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool

from engine.errors import InputError
from engine.harness.interfaces import Call
from engine.tasks import TASKS
from engine.tasks.base import Environment, Item, StepResult, Task, validate_options
from engine.tasks.rbac_sql import generator
from engine.tasks.rbac_sql.data import Row, load_rows
from engine.tasks.rbac_sql.database import open_database
from engine.tasks.rbac_sql.grants import role_grant_sql
from engine.tasks.rbac_sql.guard import PermissionDenied, QueryResult, SqlError, run_guarded
from engine.tasks.rbac_sql.scorer import SCORE_MAX_ROWS, aggregate, judge_row, score_rbac_files

SQL, REFUSE = "sql", "refuse"
FEEDBACK_ROWS = 3


class RbacOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_view: Literal["role", "full"] = "role"
    show_role: StrictBool = True


def parse_options(options: dict | None) -> RbacOptions:
    return validate_options(RbacOptions, options)


_UNSET = object()


@dataclass
class RbacContext:
    """An item's row, where its database is, and its gold result once computed (shared by k samples)."""
    row: Row
    spider_dir: Path | None
    _gold: object = field(default=_UNSET, repr=False)

    @property
    def database(self):
        return open_database(self.row.db_id, self.row.schema_ddl, self.spider_dir)

    def gold_result(self) -> QueryResult | None:
        if self._gold is _UNSET:
            try:
                self._gold = run_guarded(self.database, self.row.grants, self.row.query, max_rows=SCORE_MAX_ROWS)
            except (PermissionDenied, SqlError):
                self._gold = None
        return self._gold


def _rows_text(result: QueryResult) -> str:
    n = len(result.rows)
    count = f"more than {n} rows" if result.truncated else f"{n} row{'s' if n != 1 else ''}"
    shown = json.dumps([list(r) for r in result.rows[:FEEDBACK_ROWS]], ensure_ascii=False, default=str)
    return f"OK, {count}" + (f": {shown}" if n else "") + (" ..." if n > FEEDBACK_ROWS else "")


class RbacSqlEnvironment(Environment):
    """One episode: the first valid action ends it."""

    def __init__(self, ctx: RbacContext):
        self.ctx = ctx

    def step(self, calls: list[Call]) -> StepResult:
        row = self.ctx.row
        if len(calls) != 1:
            return StepResult(f"Answer with exactly one call ({SQL} or {REFUSE}), not {len(calls)}.", 0.0, True,
                              False, {"invalid": f"{len(calls)} calls"})
        call = calls[0]
        if call.name not in (SQL, REFUSE) or (call.name == SQL and not isinstance(call.args.get("query"), str)):
            return StepResult(f"Unknown action {call.name!r}: call {SQL}(query) or {REFUSE}().", 0.0, True, False,
                              {"invalid": call.name})
        gold = self.ctx.gold_result() if row.decision == "PERMIT" and self.ctx.database.has_data else None
        if call.name == REFUSE:
            prediction = {"refuse": True}
            verdict = judge_row(row, prediction, self.ctx.spider_dir, gold_result=gold)
            feedback = "Refused."
        else:
            prediction = {"sql": call.args["query"]}
            try:
                result = run_guarded(self.ctx.database, row.grants, prediction["sql"], max_rows=SCORE_MAX_ROWS)
                feedback = _rows_text(result)
            except (PermissionDenied, SqlError) as e:
                result, feedback = None, f"ERROR: {e}"
            verdict = judge_row(row, prediction, self.ctx.spider_dir, gold_result=gold, pred_result=result)
        return StepResult(feedback, float(verdict["success"]), True, verdict["success"], prediction)


@TASKS.register("rbac_sql")
class RbacSqlTask(Task):
    name = "rbac_sql"
    benchmark = "rbac-sql"
    options_model = RbacOptions
    option_space = {"schema_view": ["role", "full"], "show_role": [True, False]}
    max_calls = 1  # a turn runs one query or refuses (`step`)

    def split_path(self, split: str) -> Path:
        for candidate in (self.data_dir / f"{split}.jsonl", Path(split)):
            if candidate.is_file():
                return candidate
        raise InputError(f"no split {split!r}: neither {self.data_dir / (split + '.jsonl')} nor a file {split!r}")

    def spider_dir(self, split_file: Path) -> Path | None:
        for d in (self.data_dir, split_file.parent,
                  self.data_dir.parent / "spider", split_file.parent.parent / "spider"):
            if (d / "database").is_dir():
                return d
        return None

    def load(self, split: str, limit: int | None = None) -> list[Item]:
        path = self.split_path(split)
        rows = load_rows(path)
        if limit is not None:
            rows = rows[:limit]
        spider = self.spider_dir(path)
        return [Item(f"{path.stem}:{r.line}", r.question,
                     {"query": r.query, "decision": r.decision, "label": r.label}, r.decision,
                     context=RbacContext(r, spider), meta={"db_id": r.db_id, "user": r.user, "line": r.line})
                for r in rows]

    def context(self, item: Item, options: dict | None = None) -> str:
        opts = parse_options(options)
        row: Row = item.context.row
        who = f"You are connected as {row.user}." if opts.show_role else ""
        lines = [f"Database: {row.db_id}. {who}".strip()]
        if opts.schema_view == "role":
            readable = row.grants.readable(row.schema)
            lines.append("Tables and columns you may read:")
            lines += [f"{t}({', '.join(cols)})" for t, cols in readable.items()] or ["(none)"]
        else:
            lines.append("Schema:")
            lines += [s.strip() for s in row.schema_ddl.strip().splitlines() if s.strip()]
            lines.append("Your grants:")
            lines.append(role_grant_sql(row.policy_sql, row.user, row.db_id) or "(none)")
        return "\n".join(lines)

    def example_call(self) -> Call:
        return Call(SQL, {"query": "SELECT name FROM employees"})

    def check_call(self, call: Call, item: Item) -> str | None:
        if call.name == SQL:
            if set(call.args) != {"query"}:
                return f"wrong arguments for {SQL}: expected ['query'], got {sorted(call.args)}"
            if not isinstance(call.args["query"], str) or not call.args["query"].strip():
                return f"{SQL}: query must be a non-empty string"
            return None
        if call.name == REFUSE:
            extra = set(call.args) - {"reason"}
            if extra:
                return f"wrong arguments for {REFUSE}: expected at most ['reason'], got {sorted(call.args)}"
            if "reason" in call.args and not isinstance(call.args["reason"], str):
                return f"{REFUSE}: reason must be a string"
            return None
        return f"unknown tool {call.name!r}: expected {SQL}(query) or {REFUSE}(reason)"

    def call_names(self, item: Item, options: dict | None = None) -> list[str]:
        return [SQL, REFUSE]

    def arg_names(self, item: Item, name: str) -> list[str] | None:
        return ["query"] if name == SQL else None  # a refusal's reason is optional

    def environment(self, item: Item, options: dict | None = None) -> Environment:
        parse_options(options)
        return RbacSqlEnvironment(item.context)

    def gold_calls(self, item: Item) -> list[Call]:
        row: Row = item.context.row
        return [Call(REFUSE)] if row.decision == "DENY" else [Call(SQL, {"query": row.query})]

    def score(self, items: list[Item], predictions: list) -> tuple[float, dict]:
        verdicts = []
        for item, pred in zip(items, predictions, strict=True):
            ctx: RbacContext = item.context
            gold = ctx.gold_result() if ctx.row.decision == "PERMIT" and ctx.database.has_data else None
            verdicts.append(judge_row(ctx.row, pred, ctx.spider_dir, gold_result=gold))
        metrics = aggregate([i.context.row for i in items], verdicts)
        return metrics["success"] or 0.0, metrics

    @classmethod
    def score_files(cls, gold, pred, *, spider: str | None = None, **_) -> dict:
        return score_rbac_files(gold, pred, spider_dir=spider)

    @classmethod
    def format_scores(cls, result: dict) -> str:
        return "\n".join(f"{k:<28}{v:.3f}" if isinstance(v, float) else f"{k:<28}{v}"
                         for k, v in result.items() if not isinstance(v, (dict, list)))

    @classmethod
    def generate(cls, out_dir, *, seed: int, sizes: dict[str, int]) -> None:
        generator.write_dataset(out_dir, seed=seed, sizes=sizes)
