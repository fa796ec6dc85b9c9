"""The SQLite database a row's SQL runs on: the Spider file when there is one
(`<spider_dir>/database/<db_id>/<db_id>.sqlite`), else one built (empty) from the row's PostgreSQL
`schema_ddl`. Either way connections are read-only; the guard (guard.py) adds the rest."""
from __future__ import annotations

import hashlib
import itertools
import re
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote as urlquote

from engine.errors import InputError
from engine.tasks.rbac_sql.sqllex import split_statements


def quote_ident(name: str) -> str:
    """Always quoted: PostgreSQL allows names SQLite rejects bare (`%_change_2007`, keywords)."""
    return '"' + name.replace('"', '""') + '"'


# ----------------------------------------------------------------------------- PostgreSQL DDL

@dataclass
class ColumnDef:
    name: str
    pg_type: str


@dataclass
class TableDef:
    name: str
    columns: list[ColumnDef] = field(default_factory=list)


_DDL_TOK = re.compile(r'\s+|--[^\n]*|/\*.*?\*/|"(?:[^"]|"")*"|\'(?:[^\']|\'\')*\'|[(),;]|[^\s(),;"\']+', re.S)
_CONSTRAINT_START = {"CONSTRAINT", "PRIMARY", "FOREIGN", "UNIQUE", "CHECK", "EXCLUDE", "LIKE"}
_COLUMN_CONSTRAINT = {"NOT", "NULL", "DEFAULT", "PRIMARY", "REFERENCES", "UNIQUE", "CHECK", "CONSTRAINT",
                      "GENERATED", "COLLATE"}
# statements that change no column a query can read
_SKIPPED = ("CREATE INDEX", "CREATE UNIQUE INDEX", "ALTER TABLE", "COMMENT ON", "CREATE SEQUENCE",
            "ALTER SEQUENCE", "SET ", "SELECT PG_CATALOG", "CREATE SCHEMA")


def _pg_name(tok: str) -> str:
    # PostgreSQL folds unquoted names to lower case and keeps quoted ones
    return tok[1:-1].replace('""', '"') if tok.startswith('"') else tok.lower()


def parse_ddl(ddl: str, *, path=None, line: int | None = None) -> list[TableDef]:
    """CREATE TABLE statements of a PostgreSQL schema dump -> tables with their columns and types."""
    tables: list[TableDef] = []
    for stmt_line, toks in split_statements(ddl, _DDL_TOK):
        def err(msg, _l=stmt_line):
            if path is not None:
                raise InputError(f"schema line {_l}: {msg}", path=path, line=line, field=f"schema_ddl:{_l}")
            raise InputError(f"schema: {msg}", line=_l, field="schema_ddl")
        head = " ".join(t.upper() for t in toks[:4])
        if any(head.startswith(s.strip()) for s in _SKIPPED):
            continue
        i = 0
        if [t.upper() for t in toks[:2]] != ["CREATE", "TABLE"]:
            err(f"expected CREATE TABLE, got {' '.join(toks[:3])!r}")
        i = 2
        if [t.upper() for t in toks[i:i + 3]] == ["IF", "NOT", "EXISTS"]:
            i += 3
        if i >= len(toks):
            err("no table name")
        name = toks[i]
        i += 1
        if "." in name and not name.startswith('"'):
            name = name.rsplit(".", 1)[1]  # schema.table
        if i >= len(toks) or toks[i] != "(":
            err(f"expected '(' after the table name {name!r}")
        # the body up to the matching parenthesis, split at top-level commas
        depth, items, cur = 0, [], []
        for tok in toks[i:]:
            if tok == "(":
                depth += 1
                if depth == 1:
                    continue
            elif tok == ")":
                depth -= 1
                if depth == 0:
                    break
            if tok == "," and depth == 1:
                items.append(cur)
                cur = []
            else:
                cur.append(tok)
        else:
            err(f"table {name!r}: unbalanced parentheses")
        if cur:
            items.append(cur)
        table = TableDef(_pg_name(name))
        for item in items:
            if not item:
                err(f"table {table.name!r}: an empty column definition")
            if item[0].upper() in _CONSTRAINT_START and not item[0].startswith('"'):
                continue  # a table constraint: nothing a reader sees
            col_type = []
            for tok in item[1:]:
                if tok.upper() in _COLUMN_CONSTRAINT:
                    break
                col_type.append(tok)
            table.columns.append(ColumnDef(_pg_name(item[0]), " ".join(col_type).lower()))
        if not table.columns:
            err(f"table {table.name!r} has no columns")
        tables.append(table)
    return tables


def sqlite_type(pg_type: str) -> str:
    """A PostgreSQL type -> the SQLite type whose affinity stores its values alike."""
    t = pg_type.lower().strip()
    if t.endswith("[]"):
        return "TEXT"
    base = t.split("(")[0].strip()
    if base in ("bigint", "integer", "int", "int2", "int4", "int8", "smallint", "serial", "bigserial",
                "smallserial", "boolean", "bool"):
        return "INTEGER"
    if base in ("double precision", "real", "float", "float4", "float8"):
        return "REAL"
    if base in ("numeric", "decimal", "money"):
        return "NUMERIC"
    if base == "bytea":
        return "BLOB"
    return "TEXT"


def sqlite_ddl(tables: list[TableDef]) -> list[str]:
    """SQLite CREATE TABLE statements; SQLite reserves `sqlite_*` names (Spider's sqlite_sequence) for
    itself, so those tables are left out (no role may read them anyway)."""
    return [f"CREATE TABLE {quote_ident(t.name)} ("
            + ", ".join(f"{quote_ident(c.name)} {sqlite_type(c.pg_type)}" for c in t.columns) + ")"
            for t in tables if not t.name.lower().startswith("sqlite_")]


# ----------------------------------------------------------------------------- databases

@dataclass
class BTree:
    """A table or index b-tree: the table it stores and its column names in record order
    (None: the rowid; '*': an expression over the row)."""
    table: str
    columns: list[str | None]
    is_index: bool


class Database:
    """A read-only SQLite database: where it came from, its tables and columns (lowercase name ->
    the names as stored) and every b-tree's root page, for the guard's bytecode audit."""

    def __init__(self, db_id: str, uri: str, source: str, *, keeper: sqlite3.Connection | None = None,
                 tmpdir=None):
        self.db_id, self.uri, self.source = db_id, uri, source
        self._keeper, self._tmpdir = keeper, tmpdir  # keep a built in-memory database alive
        with self._trusted() as conn:
            self.tables: dict[str, list[str]] = {}
            self.names: dict[str, str] = {}
            self.btrees: dict[int, BTree] = {}
            self.views: set[str] = set()  # a view is granted like a table; the guard also checks its reads
            objects = conn.execute("SELECT type, name, tbl_name, rootpage FROM sqlite_master "
                                   "WHERE type IN ('table', 'index')").fetchall()
            for typ, name, tbl, root in objects:
                if typ != "table" or name.lower().startswith("sqlite_"):
                    continue
                info = conn.execute(f"PRAGMA table_xinfo({quote_ident(name)})").fetchall()
                cols = [r[1] for r in info]
                key = name.lower()
                self.tables[key], self.names[key] = cols, name
                without_rowid = bool(conn.execute(
                    "SELECT wr FROM pragma_table_list WHERE name = ? AND schema = 'main'", (name,)).fetchone()[0])
                if root and not without_rowid:
                    self.btrees[root] = BTree(key, [c.lower() for c in cols], False)
            for typ, name, tbl, root in objects:
                if typ != "index" or not root or tbl.lower() not in self.tables:
                    continue
                xinfo = conn.execute(f"PRAGMA index_xinfo({quote_ident(name)})").fetchall()
                cols = [(r[2].lower() if r[2] is not None else (None if r[1] == -1 else "*")) for r in xinfo]
                self.btrees[root] = BTree(tbl.lower(), cols, True)
            for typ, name, tbl, root in objects:  # a WITHOUT ROWID table is its primary-key index
                if typ == "table" and root and root not in self.btrees and name.lower() in self.tables:
                    pk = [r[1] for r in conn.execute(f"PRAGMA index_list({quote_ident(name)})") if r[3] == "pk"]
                    if pk:
                        xinfo = conn.execute(f"PRAGMA index_xinfo({quote_ident(pk[0])})").fetchall()
                        self.btrees[root] = BTree(name.lower(), [r[2].lower() if r[2] else None for r in xinfo],
                                                  True)
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
                key = name.lower()
                self.tables[key] = [r[1] for r in conn.execute(f"PRAGMA table_xinfo({quote_ident(name)})")]
                self.names[key] = name
                self.views.add(key)
            self.btrees[1] = BTree("sqlite_master", ["type", "name", "tbl_name", "rootpage", "sql"], False)
            self.has_data = any(conn.execute(f"SELECT 1 FROM {quote_ident(n)} LIMIT 1").fetchone()
                                for k, n in self.names.items() if k not in self.views)

    def _trusted(self):
        return _Closing(sqlite3.connect(self.uri, uri=True, cached_statements=0))

    def connect(self) -> sqlite3.Connection:
        """A fresh read-only connection, statement cache off: a statement is authorized when it is
        prepared, so a cached statement must never be reused under another role's authorizer."""
        conn = sqlite3.connect(self.uri, uri=True, cached_statements=0, isolation_level=None,
                               check_same_thread=True)
        return conn

    def schema(self) -> dict[str, list[str]]:
        """{lowercase table: lowercase columns}."""
        return {t: [c.lower() for c in cols] for t, cols in self.tables.items()}

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None


class _Closing:
    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        return self.conn

    def __exit__(self, *exc):
        self.conn.close()


def spider_path(spider_dir, db_id: str) -> Path | None:
    if spider_dir is None:
        return None
    p = Path(spider_dir) / "database" / db_id / f"{db_id}.sqlite"
    return p if p.is_file() else None


def readonly_uri(path: Path) -> str:
    # immutable: no locks and no -journal/-wal files, so a read-only folder (CI's shared data) works
    return f"file:{urlquote(str(Path(path).resolve()))}?mode=ro&immutable=1"


_memdb_ids = itertools.count()


def build_from_ddl(db_id: str, schema_ddl: str, *, path=None, line=None) -> Database:
    """An empty database with the DDL's tables, in memory (SQLite's memdb VFS: the builder connection
    writes, every other connection opens it read-only); a temporary file where memdb is missing."""
    statements = sqlite_ddl(parse_ddl(schema_ddl, path=path, line=line))
    digest = hashlib.sha1(schema_ddl.encode()).hexdigest()[:16]
    name = f"/rbac_sql-{db_id}-{digest}-{next(_memdb_ids)}"
    try:
        keeper = sqlite3.connect(f"file:{urlquote(name)}?vfs=memdb", uri=True)
        _create(keeper, statements, path, line)
        return Database(db_id, f"file:{urlquote(name)}?vfs=memdb&mode=ro", "ddl", keeper=keeper)
    except sqlite3.OperationalError as e:
        if "no such vfs" not in str(e):
            raise
    tmp = tempfile.TemporaryDirectory(prefix="rbac_sql-")
    file = Path(tmp.name) / f"{db_id}.sqlite"
    conn = sqlite3.connect(file)
    _create(conn, statements, path, line)
    conn.close()
    return Database(db_id, readonly_uri(file), "ddl", tmpdir=tmp)


def _create(conn, statements, path, line):
    for s in statements:
        try:
            conn.execute(s)
        except sqlite3.Error as e:
            raise InputError(f"schema_ddl: SQLite cannot create {s[:60]!r}: {e}", path=path, line=line,
                             field="schema_ddl") from None
    conn.commit()


_CACHE: OrderedDict[tuple, Database] = OrderedDict()
_CACHE_SIZE = 64
_lock = threading.Lock()


def open_database(db_id: str, schema_ddl: str, spider_dir=None, *, path=None, line=None) -> Database:
    """The row's database (cached): the Spider SQLite file when present, else built from schema_ddl."""
    file = spider_path(spider_dir, db_id)
    if file is not None:
        st = file.stat()  # a regenerated file is a new database
        key = ("spider", str(file.resolve()), st.st_mtime_ns, st.st_size, st.st_ino)
    else:
        key = ("ddl", db_id, hashlib.sha1(schema_ddl.encode()).hexdigest())
    with _lock:
        db = _CACHE.get(key)
        if db is not None:
            _CACHE.move_to_end(key)
            return db
    db = Database(db_id, readonly_uri(file), "spider") if file is not None else \
        build_from_ddl(db_id, schema_ddl, path=path, line=line)
    with _lock:
        _CACHE[key] = db
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)  # not closed: an environment may still hold it; GC frees it
    return db
