"""The permission guard: run model-written SQL for a role on a SQLite database so that it can read only
what the role was GRANTed, the way PostgreSQL checks it, and can never write.

Layers, each enough on its own to stop a write:
  1. The connection is read-only: `mode=ro` (plus `immutable` for files), `PRAGMA query_only`,
     `trusted_schema=OFF`, no extension loading, SQLITE_LIMIT_ATTACHED = 0, a fresh connection per
     statement with the statement cache off (a statement is authorized when prepared: a cached one must
     never be reused under another role).
  2. A SQLite authorizer, consulted while the statement is prepared: a statement may only SELECT, READ
     columns and call allow-listed functions. Every write, schema change, ATTACH/DETACH, PRAGMA,
     transaction, savepoint, recursive CTE and any other function (load_extension, randomblob, json_*, ...)
     is refused for every role.
  3. The statement is first prepared under EXPLAIN (nothing runs) and its bytecode audited: the tables
     and indexes it opens, the columns it reads, and no opcode that writes. This catches what SQLite's
     authorizer does not report: the join columns of USING/NATURAL joins and tables read for no column.
     USING and NATURAL join columns are also required conservatively from the SQL text.
Only one statement: `sqlite3` refuses a second one (`SELECT 1; DROP TABLE t`) before preparing it.

Reads follow PostgreSQL: a column read needs SELECT on the column (or the table); a table read for no
column (`SELECT count(*) FROM t`) needs SELECT on at least one of its columns; `SELECT *` needs every
column. The error names the first table of the range table (the FROM order) that fails, in PostgreSQL's
words: `permission denied for table t` (PostgreSQL uses the table wording for column privileges too).
SQLite's own tables (`sqlite_master`, `sqlite_schema`, `sqlite_sequence`, ...) and table-valued functions
(`pragma_table_info`, `json_each`) are granted to nobody. A view in the database is checked by the
columns it reads underneath (all of the view's columns, as SQLite expands it) and by its own name:
stricter than PostgreSQL, whose views read with their owner's rights (Spider has no views). No role
can create one. A CTE that the query never uses is not read, so not checked.
A row limit and a statement timeout (a progress handler) bound runaway queries.
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from engine.tasks.rbac_sql import sqllex
from engine.tasks.rbac_sql.database import Database, open_database
from engine.tasks.rbac_sql.grants import RoleGrants

MAX_ROWS = 1000
TIMEOUT_S = 2.0
MAX_SQL_CHARS = 20_000
ONLY_SELECT = "permission denied: only one read-only SELECT statement may be run"

# read-only scalar, aggregate and window functions; everything else is refused
ALLOWED_FUNCTIONS = frozenset("""
count sum total avg min max group_concat string_agg
abs round length lower upper trim ltrim rtrim substr substring replace instr coalesce ifnull nullif iif
like glob typeof printf format char unicode hex
date time datetime julianday strftime unixepoch
sign ceil ceiling floor sqrt power pow exp ln log log10 log2 mod pi trunc
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
""".split())

_ACTION_NAMES = {getattr(sqlite3, n): n[len("SQLITE_"):] for n in dir(sqlite3)
                 if n.startswith(("SQLITE_CREATE_", "SQLITE_DROP_")) or n in (
                     "SQLITE_ALTER_TABLE", "SQLITE_ANALYZE", "SQLITE_ATTACH", "SQLITE_DELETE", "SQLITE_DETACH",
                     "SQLITE_INSERT", "SQLITE_PRAGMA", "SQLITE_REINDEX", "SQLITE_SAVEPOINT",
                     "SQLITE_TRANSACTION", "SQLITE_UPDATE", "SQLITE_RECURSIVE")}
_SQLITE_FUNCTION = getattr(sqlite3, "SQLITE_FUNCTION", 31)

# bytecode that opens a real b-tree for reading / cursors over temporary data only
_OPEN_READ = {"OpenRead", "ReopenIdx"}
_OPEN_TEMP = {"OpenEphemeral", "OpenAutoindex", "OpenPseudo", "SorterOpen", "OpenDup"}
# opcodes a read-only SELECT never needs
_FORBIDDEN_OPS = {"OpenWrite", "VOpen", "VCreate", "VDestroy", "VUpdate", "VBegin", "VRename", "VCheck",
                  "Destroy", "Clear", "CreateBtree", "SqlExec", "ParseSchema", "LoadAnalysis", "DropTable",
                  "DropIndex", "DropTrigger", "Vacuum", "IncrVacuum", "JournalMode", "Checkpoint",
                  "IntegrityCk", "SetCookie", "Pagecount", "MaxPgcnt", "Expire", "CursorLock", "CursorUnlock",
                  "TableLock", "Program", "Param", "FkCounter", "FkIfZero", "AutoCommit", "Savepoint",
                  "ResetCount"}
_WRITE_OPS = {"Insert", "IdxInsert", "Delete", "IdxDelete", "NewRowid", "RowCell"}
_FUNCTION_OPS = {"Function", "PureFunc", "AggStep", "AggStep1", "AggValue", "AggInverse", "AggFinal"}
_OPFLAG_P2ISREG = 0x10


class GuardError(Exception):
    """The statement was not run."""


class PermissionDenied(GuardError):
    """The role may not do this. `table`/`column` name the first read it lacks, when it is a read."""

    def __init__(self, message: str, *, table: str | None = None, column: str | None = None):
        super().__init__(message)
        self.table, self.column = table, column


class SqlError(GuardError):
    """Not valid SQL for this database, or stopped (timeout, too big)."""


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool  # more rows than the limit; `rows` holds the first ones


class _Authorizer:
    """SQLite calls this for every action while it prepares a statement. In `collect` mode (under
    EXPLAIN: nothing runs) reads the role lacks are recorded, so that all of them are known and the
    error can name the table PostgreSQL would; in `enforce` mode they are refused outright."""

    def __init__(self, grants: RoleGrants, tables: set[str]):
        self.grants, self.tables = grants, tables
        self.mode = "collect"
        self.reads: list[tuple[str, str]] = []
        self.refusal: str | None = None
        self.saw_select = False

    def _refuse(self, why: str) -> int:
        if self.refusal is None:
            self.refusal = why
        return sqlite3.SQLITE_DENY

    def __call__(self, action, arg1, arg2, dbname, source):
        if action == sqlite3.SQLITE_SELECT:
            self.saw_select = True
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            table, column = (arg1 or "").lower(), (arg2 or "").lower()
            if dbname not in (None, "main"):
                return self._refuse(f"permission denied for schema {dbname}")
            self.reads.append((table, column))
            if self.mode == "enforce" and not _permitted(self.grants, self.tables, table, column):
                return self._refuse(f"permission denied for table {table}")
            return sqlite3.SQLITE_OK
        if action == _SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in ALLOWED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            return self._refuse(f"permission denied for function {name}")
        what = _ACTION_NAMES.get(action, f"action {action}").replace("_", " ")
        target = f" {arg1}" if isinstance(arg1, str) and arg1 else ""
        return self._refuse(f"{ONLY_SELECT} ({what}{target} refused)")


def _permitted(grants: RoleGrants, tables: set[str], table: str, column: str) -> bool:
    if table not in tables:  # SQLite's own tables, table-valued functions, anything not in the schema
        return False
    return grants.may_read(table, column)


def _audit(program: list[tuple], db: Database) -> tuple[list[tuple[str, str]], str | None]:
    """(reads, refusal) of an EXPLAIN listing: every real b-tree opened is a read of its table, every
    Column opcode on it a read of that column; opcodes that write or reach outside are refusals."""
    cursors: dict[int, list] = {}
    reads: list[tuple[str, str]] = []
    for _addr, op, p1, p2, p3, p4, p5, *_ in program:
        if op in _FORBIDDEN_OPS:
            return reads, f"{ONLY_SELECT} (opcode {op} refused)"
        if op in _OPEN_READ:
            if (p5 or 0) & _OPFLAG_P2ISREG or p3 != 0:
                return reads, "permission denied: the statement opens a table outside the database"
            bt = db.btrees.get(p2)
            if bt is None:
                return reads, f"permission denied: the statement opens an unknown b-tree (root page {p2})"
            cursors.setdefault(p1, []).append(bt)
            reads.append((bt.table, ""))
        elif op in _OPEN_TEMP:
            continue
        elif op == "Column":
            for bt in cursors.get(p1, []):
                col = bt.columns[p2] if 0 <= p2 < len(bt.columns) else "*"
                if col == "*":  # an expression index or an unknown slot: the whole row
                    reads += [(bt.table, c) for c in db.schema().get(bt.table, ["*"])]
                elif col is not None:  # None: the rowid, an internal position, not a column
                    reads.append((bt.table, col))
        elif op in _WRITE_OPS and p1 in cursors:
            return reads, f"{ONLY_SELECT} (a write, {op}, refused)"
        elif op == "Transaction" and p2:
            return reads, f"{ONLY_SELECT} (a write transaction refused)"
        elif op in _FUNCTION_OPS and isinstance(p4, str):
            name = p4.split("(", 1)[0].lower()
            if name not in ALLOWED_FUNCTIONS:
                return reads, f"permission denied for function {name}"
    return reads, None


def _join_reads(sql: str, tables_read: set[str], db: Database) -> list[tuple[str, str]]:
    """USING and NATURAL join columns, which SQLite resolves without asking the authorizer. Without a
    parser it is not known which two sides a join has, so the charge is conservative (it can only deny
    more): a USING column is charged to every table of the query that has it; under NATURAL a table's
    column is charged when another table of the query has it, when the table is joined with itself, or
    when the name occurs anywhere in the text (a subquery's alias)."""
    schema = db.schema()
    reads = []
    for col in sqllex.using_columns(sql):
        reads += [(t, col) for t in tables_read if col in schema.get(t, [])]
    if sqllex.has_natural_join(sql):
        tabs = [t for t in tables_read if t in schema]
        mentions = sqllex.from_tables(sql, tabs)
        names = sqllex.identifiers(sql)
        for t in tabs:
            for col in schema[t]:
                if mentions.count(t) > 1 or col in names or any(col in schema[o] for o in tabs if o != t):
                    reads.append((t, col))
    return reads


def _sqlite_message(e: Exception) -> str:
    msg = str(e)
    if msg == "interrupted":  # the progress handler stopped it
        return "canceling statement due to statement timeout"
    if "one statement at a time" in msg:  # sqlite3 refuses a second statement before preparing it
        return "only one statement may be run at a time"
    return msg


class Guard:
    """Runs one role's statements on one database."""

    def __init__(self, db: Database, grants: RoleGrants, *, max_rows: int = MAX_ROWS,
                 timeout_s: float = TIMEOUT_S):
        self.db, self.grants, self.max_rows, self.timeout_s = db, grants, max_rows, timeout_s

    def _connect(self) -> sqlite3.Connection:
        conn = self.db.connect()
        conn.execute("PRAGMA query_only = ON")      # before the authorizer, which refuses every PRAGMA
        conn.execute("PRAGMA trusted_schema = OFF")
        if hasattr(conn, "enable_load_extension"):
            conn.enable_load_extension(False)
        if hasattr(conn, "setlimit"):
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000_000)
            conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4)
            conn.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 64)
            conn.setlimit(sqlite3.SQLITE_LIMIT_VDBE_OP, 200_000)
            conn.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 1)
        return conn

    def run(self, sql: str) -> QueryResult:
        """The statement's result, or PermissionDenied / SqlError; it never writes."""
        if not isinstance(sql, str):
            raise SqlError(f"expected SQL text, got {type(sql).__name__}")
        if len(sql) > MAX_SQL_CHARS:
            raise SqlError(f"statement too long ({len(sql)} characters, at most {MAX_SQL_CHARS})")
        if "\x00" in sql:
            raise SqlError("statement contains a NUL character")
        tables = set(self.db.tables)
        conn = self._connect()
        auth = _Authorizer(self.grants, tables)
        conn.set_authorizer(auth)
        try:
            # 1. prepare under EXPLAIN: the authorizer sees every action, nothing runs
            try:
                cur = conn.execute("EXPLAIN " + sql)
                program = cur.fetchall()
            except (sqlite3.Error, sqlite3.Warning) as e:
                if auth.refusal:
                    raise PermissionDenied(auth.refusal) from None
                raise SqlError(_sqlite_message(e)) from None
            if [d[0] for d in cur.description or []][:2] != ["addr", "opcode"]:
                # `QUERY PLAN SELECT ...` became EXPLAIN QUERY PLAN: not a bytecode listing, and not SQL
                raise SqlError("syntax error: the statement must be a SELECT")
            if auth.refusal:  # refused but SQLite carried on (never expected): refuse anyway
                raise PermissionDenied(auth.refusal)
            if not auth.saw_select:
                raise PermissionDenied(ONLY_SELECT)
            audited, refusal = _audit(program, self.db)
            if refusal:
                raise PermissionDenied(refusal)
            reads = auth.reads + audited
            reads += _join_reads(sql, {t for t, _ in reads}, self.db)
            self._check(sql, reads, tables)
            # 2. run it, with the authorizer now refusing any read the role lacks (defence in depth)
            auth.mode = "enforce"
            deadline = time.monotonic() + self.timeout_s
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
            try:
                cur = conn.execute(sql)
                rows = cur.fetchmany(self.max_rows + 1)
                columns = [d[0] for d in cur.description or []]
            except (sqlite3.Error, sqlite3.Warning) as e:
                if auth.refusal:
                    raise PermissionDenied(auth.refusal) from None
                raise SqlError(_sqlite_message(e)) from None
            return QueryResult(columns, [tuple(r) for r in rows[:self.max_rows]], len(rows) > self.max_rows)
        finally:
            conn.close()

    def _check(self, sql: str, reads: list[tuple[str, str]], tables: set[str]) -> None:
        denied: dict[str, str] = {}
        for table, column in reads:
            if not _permitted(self.grants, tables, table, column):
                denied.setdefault(table, column)
        if not denied:
            return
        order = sqllex.table_order(sql, denied)
        first = (order + [t for t in denied if t not in order])[0]
        raise PermissionDenied(f"permission denied for table {first}", table=first, column=denied[first] or None)


def run_guarded(db: Database, grants: RoleGrants, sql: str, **kw) -> QueryResult:
    return Guard(db, grants, **kw).run(sql)


def outcome(db: Database, grants: RoleGrants, sql: str, **kw) -> tuple[str, str, QueryResult | None]:
    """('permit', '', result) | ('deny', message, None) | ('error', message, None)."""
    try:
        return "permit", "", run_guarded(db, grants, sql, **kw)
    except PermissionDenied as e:
        return "deny", str(e), None
    except SqlError as e:
        return "error", str(e), None


def error_label(message: str) -> str:
    """A guard message as a Spider-AC label (PostgreSQL's client prints `ERROR:  ...`; the labels use one space)."""
    return f"ERROR: {message}\n"


def label_rows(rows: list[tuple], n: int = 5) -> str:
    """The first result rows as a Spider-AC PERMIT label: `[[4], [5], [8]]`."""
    return json.dumps([list(r) for r in rows[:n]], ensure_ascii=False)


def guard_report(gold_path, spider_dir=None) -> dict:
    """Run each row's gold query under its role through the guard; the agreement with the rows' labels
    (PERMIT vs DENY), the denials that name the label's table, and every disagreement."""
    from engine.tasks.rbac_sql.data import load_rows

    rows = load_rows(gold_path)
    agree = permit_agree = deny_agree = table_agree = n_permit = 0
    sources: dict[str, int] = {}
    disagreements = []
    for row in rows:
        db = open_database(row.db_id, row.schema_ddl, spider_dir, path=gold_path, line=row.line)
        sources[db.source] = sources.get(db.source, 0) + 1
        kind, detail, _ = outcome(db, row.grants, row.query)
        if row.decision == "PERMIT":
            n_permit += 1
            ok = kind == "permit"
            permit_agree += ok
        else:
            # a permission label wants a permission denial; any other PostgreSQL error, an error
            ok = kind == "deny" if "permission denied" in row.label else kind in ("deny", "error")
            deny_agree += ok
            if ok and kind == "deny" and detail.strip() == row.label.removeprefix("ERROR:").strip():
                table_agree += 1
        agree += ok
        if not ok:
            disagreements.append({"line": row.line, "index": row.line - 1, "role": row.user, "query": row.query,
                                  "label": row.label.strip(), "guard": kind, "detail": detail})
    n = len(rows)
    n_deny = n - n_permit
    return {"gold": str(Path(gold_path)), "rows": n, "agree": agree, "agreement": agree / n if n else None,
            "permit_rows": n_permit, "permit_agree": permit_agree, "deny_rows": n_deny, "deny_agree": deny_agree,
            "deny_same_message": table_agree, "sources": sources, "disagreements": disagreements}
