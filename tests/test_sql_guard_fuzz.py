"""Fuzzing the SQL permission guard with hostile statements under every role of two synthetic databases
and Spider's department_store (its DDL and policy from the committed fixture).

Each database is filled with marker values, unique per table, column and row (`<9f3a...>`), so
that a value that comes back can be traced to the column it was read from. For every role and every
statement: nothing of a column the role may not read comes back (checked on the returned values, not
on the exception), a statement that reads such a column is denied, one that reads only granted columns
is not, and nothing is ever written (the file's hash, every table's rows and the folder are unchanged)."""
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from engine.tasks.rbac_sql.data import load_rows
from engine.tasks.rbac_sql.database import open_database, parse_ddl, quote_ident, sqlite_ddl
from engine.tasks.rbac_sql.generator import write_dataset
from engine.tasks.rbac_sql.grants import RoleGrants, grants_for
from engine.tasks.rbac_sql.guard import outcome

FIXTURE = Path(__file__).parent / "fixtures" / "rbac_sql" / "department_store_8.jsonl"
ROLES = ("User_1", "User_2", "User_3", "User_4")
ROWS_PER_TABLE = 3


def marker(table: str, column: str, i: int) -> str:
    # a random-looking token per cell: no part of one marker occurs in another, so even a piece of a
    # value (substr) traces back to its column
    return "<" + hashlib.sha1(f"{table}.{column}.{i}".encode()).hexdigest()[:16] + ">"


# --------------------------------------------------------------------------- the databases

def build_marked(root: Path, db_id: str, schema_ddl: str) -> Path:
    """A Spider-layout database with the DDL's tables, every cell a marker (text in any column)."""
    path = root / "database" / db_id / f"{db_id}.sqlite"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    tables = [t for t in parse_ddl(schema_ddl) if not t.name.startswith("sqlite_")]
    for stmt in sqlite_ddl(tables):
        conn.execute(stmt)
    for t in tables:
        conn.executemany(f"INSERT INTO {quote_ident(t.name)} VALUES ({', '.join('?' * len(t.columns))})",
                         [[marker(t.name, c.name, i) for c in t.columns] for i in range(ROWS_PER_TABLE)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """[(db_id, schema_ddl, policy rows by role, spider_dir)] for two synthetic databases and department_store."""
    gen = tmp_path_factory.mktemp("gen")
    write_dataset(gen, seed=11, sizes={"train": 40})
    rows = load_rows(gen / "train.jsonl") + load_rows(FIXTURE)
    picked = {}
    for r in rows:
        if r.db_id in ("company", "library", "department_store"):
            picked.setdefault(r.db_id, r)
    assert sorted(picked) == ["company", "department_store", "library"]
    out = []
    for db_id, row in sorted(picked.items()):
        root = tmp_path_factory.mktemp(f"marked_{db_id}")
        build_marked(root, db_id, row.schema_ddl)
        out.append((db_id, row, root))
    return out


# --------------------------------------------------------------------------- the statements

def read_probes(schema: dict[str, list[str]]) -> list[tuple[str, set]]:
    """(SQL, the (table, column) reads PostgreSQL would check; '' = the table, for no column)."""
    probes = []
    tables = list(schema)
    for ti, t in enumerate(tables):
        cols = schema[t]
        ot = tables[(ti + 1) % len(tables)]
        oc = schema[ot][0]
        every = {(t, c) for c in cols}
        probes += [
            (f"SELECT * FROM {t}", every),
            (f"SELECT count(*) FROM {t}", {(t, "")}),
            (f"SELECT 1 FROM {t}", {(t, "")}),
            (f"SELECT EXISTS (SELECT 1 FROM {t})", {(t, "")}),
            (f"SELECT count(*) FROM {t} AS a JOIN {t} AS b USING ({cols[0]})", {(t, cols[0])}),
            (f"SELECT 1 FROM {t} AS a JOIN {ot} AS b USING ({cols[0]})" if cols[0] in schema[ot] else
             f"SELECT 1 FROM {t} AS a, {ot} AS b", {(t, "")} | {(ot, "")} | (
                {(t, cols[0]), (ot, cols[0])} if cols[0] in schema[ot] else set())),
            (f"SELECT * FROM {t} NATURAL JOIN {t} AS b", every),
            (f"SELECT 1 FROM {t} NATURAL JOIN {t} AS b", every),
            (f"SELECT count(*) FROM {t} NATURAL JOIN (SELECT 'x' AS {cols[-1]})", {(t, cols[-1])}),
            (f"SELECT count(*) FROM {t} JOIN (SELECT 'x' AS {cols[-1]}) USING ({cols[-1]})", {(t, cols[-1])}),
            (f"SELECT * FROM (SELECT * FROM {t})", every),
            (f"SELECT rowid, * FROM {t}", every | {(t, "rowid")}),
        ]
        for c in cols:
            r = {(t, c)}
            probes += [
                (f"SELECT {c} FROM {t}", r),
                (f'SELECT "{c}" FROM "{t}"', r),
                (f"SELECT [{c}] FROM [{t}]", r),
                (f"SELECT `{c}` FROM `{t}`", r),
                (f"SELECT {c.upper()} FROM {t.upper()}", r),
                (f"SeLeCt {t}.{c} FrOm {t}", r),
                (f"SELECT x.{c} FROM {t} AS x", r),
                (f"SELECT {c} FROM main.{t}", r),
                (f'SELECT {c} FROM "main"."{t}"', r),
                (f"SELECT (SELECT {c} FROM {t} LIMIT 1)", r),
                (f"SELECT 1 FROM {t} WHERE {c} IS NOT NULL", r),
                (f"SELECT * FROM (SELECT {c} FROM {t})", r),
                (f"WITH w AS (SELECT {c} FROM {t}) SELECT * FROM w", r),
                (f"WITH w(x) AS (SELECT {c} FROM {t}) SELECT x FROM w", r),
                (f"SELECT {oc} FROM {ot} UNION SELECT {c} FROM {t}", r | {(ot, oc)}),
                (f"SELECT {c} FROM {t} UNION ALL SELECT {c} FROM {t}", r),
                (f"SELECT upper({c}) FROM {t}", r),
                (f"SELECT hex({c}) FROM {t}", r),
                (f"SELECT substr({c}, 3) FROM {t}", r),
                (f"SELECT {c} || '' FROM {t}", r),
                (f"SELECT group_concat({c}) FROM {t}", r),
                (f"SELECT max({c}) FROM {t}", r),
                (f"SELECT count({c}) FROM {t}", r),
                (f"SELECT 1 FROM {t} ORDER BY {c}", r),
                (f"/* a comment */ SELECT {c} FROM {t} -- and a trailing one", r),
                (f"SELECT {c}/**/FROM/**/{t}", r),
                (f"SELECT {c} FROM {t}; -- DROP TABLE {t}", r),
                (f"SELECT {c} AS harmless FROM {t}", r),
                (f"SELECT CAST({c} AS TEXT) FROM {t}", r),
                (f"SELECT EXISTS (SELECT 1 FROM {t} WHERE {c} LIKE '<%')", r),
                (f"SELECT first_value({c}) OVER () FROM {t}", r),
                (f"SELECT CASE WHEN {c} IS NULL THEN 'n' ELSE {c} END FROM {t}", r),
                (f"VALUES ((SELECT {c} FROM {t} LIMIT 1))", r),
                (f"SELECT a.{c} FROM {t} AS a JOIN {t} AS b ON a.{c} = b.{c}", r),
                (f"SELECT {c} FROM {t} WHERE {c} IN (SELECT {c} FROM {t})", r),
                (f"SELECT 1 FROM {t} AS a JOIN {t} AS b USING ({c})", r),
                (f"SELECT printf('%s', {c}) FROM {t}", r),
                (f"SELECT {c} FROM ({t})", r),
                (f"SELECT {c} FROM {t} WHERE 1 /* ' */ -- '", r),
            ]
    return probes


def refused_statements(schema: dict[str, list[str]], tmp: Path) -> list[str]:
    """Statements no role may run: writes, schema changes, ATTACH, PRAGMA, transactions, extension
    loading, functions off the allow-list, SQLite's own tables, table-valued functions, stacked
    statements, with comment, case and quoting tricks."""
    out = []
    for t, cols in schema.items():
        c = cols[-1]
        out += [
            f"INSERT INTO {t} DEFAULT VALUES", f"INSERT INTO {t} SELECT * FROM {t}",
            f"INSERT INTO {t} ({c}) VALUES ('x')", f"REPLACE INTO {t} ({c}) VALUES ('x')",
            f"INSERT OR IGNORE INTO {t} ({c}) VALUES ('x') RETURNING *",
            f"UPDATE {t} SET {c} = NULL", f"UPDATE {t} SET {c} = 'x' WHERE 1 RETURNING {c}",
            f"DELETE FROM {t}", f"DELETE FROM {t} RETURNING *", f"dElEtE fRoM {t}", f"\tDELETE\nFROM {t}",
            f'DELETE FROM "{t}"', f"DELETE FROM main.{t}", f"/* x */ DELETE FROM {t}",
            f"-- c\nDELETE FROM {t}", f"DROP TABLE {t}", f"DROP TABLE [{t}]", f"DROP TABLE `{t}`",
            f"DrOp TaBlE IF EXISTS {t}", f"ALTER TABLE {t} RENAME TO x_{t}", f"ALTER TABLE {t} ADD COLUMN zz",
            f"ALTER TABLE {t} DROP COLUMN {c}", f"ALTER TABLE {t} RENAME COLUMN {c} TO zz",
            f"CREATE INDEX ix_{t} ON {t}({c})", f"CREATE VIEW v_{t} AS SELECT * FROM {t}",
            f"CREATE TEMP VIEW v_{t} AS SELECT * FROM {t}", f"CREATE TABLE copy_{t} AS SELECT * FROM {t}",
            f"CREATE TEMP TABLE copy_{t} AS SELECT * FROM {t}",
            f"CREATE TRIGGER tr_{t} AFTER INSERT ON {t} BEGIN DELETE FROM {t}; END",
            f"WITH x AS (SELECT 1) DELETE FROM {t}", f"WITH x AS (SELECT 1) INSERT INTO {t} SELECT * FROM {t}",
            f"WITH x AS (SELECT 1) UPDATE {t} SET {c} = NULL", f"SELECT 1; DROP TABLE {t}",
            f"SELECT 1;DELETE FROM {t}", f"SELECT 1; -- x\nDELETE FROM {t}", f"SELECT 1 /* */; UPDATE {t} SET {c} = 1",
            f"EXPLAIN DELETE FROM {t}", f"EXPLAIN QUERY PLAN SELECT * FROM {t}", f"QUERY PLAN SELECT * FROM {t}",
            f"QUERY PLAN DELETE FROM {t}", f"PRAGMA table_info({t})",
            f"SELECT * FROM pragma_table_info('{t}')", f"SELECT name FROM pragma_table_xinfo('{t}')",
            f"SELECT * FROM pragma_index_list('{t}')", f"REINDEX {t}", f"ANALYZE {t}",
            f"SELECT sql FROM sqlite_master WHERE name = '{t}'",
            f"SELECT {c} FROM {t} UNION SELECT sql FROM sqlite_master",
        ]
    out += [
        "CREATE TABLE z (a)", "CREATE TEMP TABLE z (a)", "CREATE VIRTUAL TABLE z USING fts5(a)",
        f"ATTACH '{tmp / 'attached.db'}' AS x", "ATTACH ':memory:' AS x", "ATTACH DATABASE 'file:x?mode=memory' AS y",
        "DETACH main", "DETACH DATABASE temp", "PRAGMA writable_schema = 1", "PRAGMA query_only = 0",
        "PRAGMA journal_mode = delete", "PRAGMA user_version = 7", "PRAGMA database_list", "pragma schema_version",
        "PRAGMA main.user_version = 1", "PRAGMA trusted_schema = ON", "VACUUM", f"VACUUM INTO '{tmp / 'copy.db'}'",
        f"VACUUM main INTO '{tmp / 'copy2.db'}'", "REINDEX", "ANALYZE", "BEGIN", "BEGIN IMMEDIATE", "COMMIT", "END",
        "ROLLBACK", "SAVEPOINT a", "RELEASE a", "SELECT load_extension('x')",
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so', 'sqlite3_extension_init')",
        "SELECT writefile('/tmp/pwned', 'x')", "SELECT readfile('/etc/passwd')", "SELECT fts3_tokenizer('simple')",
        "SELECT sqlite_version()", "SELECT sqlite_source_id()", "SELECT sqlite_compileoption_get(0)",
        "SELECT randomblob(1000000000)", "SELECT zeroblob(1000000000)", "SELECT random()", "SELECT changes()",
        "SELECT last_insert_rowid()", "SELECT json('{}')", "SELECT quote(1)", "SELECT unlikely(1)",
        "SELECT * FROM json_each('[1,2]')", "SELECT * FROM json_tree('{\"a\": 1}')",
        "SELECT * FROM generate_series(1, 3)", "SELECT * FROM pragma_database_list",
        "SELECT * FROM pragma_compile_options", "SELECT * FROM sqlite_master", "SELECT * FROM main.sqlite_master",
        "SELECT * FROM sqlite_schema", "SELECT * FROM sqlite_temp_master", "SELECT * FROM temp.sqlite_master",
        "SELECT * FROM sqlite_sequence", "SELECT * FROM sqlite_stat1", "SELECT count(*) FROM sqlite_master",
        "SELECT name FROM sqlite_master UNION SELECT 1", "SELECT * FROM \"sqlite_master\"",
        "SELECT * FROM [SQLITE_MASTER]",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "DEL/**/ETE FROM x", "SELECT 1 FROM x WHERE 1; ATTACH ':memory:' AS y", "SELECT ?", "SELECT :a",
        "", "   ", "-- only a comment", "/* unterminated", "SELECT 'unterminated", "\x00SELECT 1",
    ]
    return out


# --------------------------------------------------------------------------- the checks

def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def row_counts(path: Path) -> dict:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        return {n: conn.execute(f"SELECT count(*) FROM {quote_ident(n)}").fetchone()[0]
                for n in names if conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (n,)).fetchone()[0]
                == "table"} | {"__schema__": names}
    finally:
        conn.close()


def leaked(result_rows, forbidden_markers: list[str]) -> list:
    """The returned values that carry a marker of a forbidden column, whole or in part, in any case or
    hex-encoded."""
    found = []
    for row in result_rows:
        for v in row:
            texts = []
            if isinstance(v, bytes):
                texts.append(v.decode("utf-8", "ignore"))
            elif v is not None:
                texts.append(str(v))
            for s in list(texts):
                try:
                    texts.append(bytes.fromhex(s).decode("utf-8", "ignore"))
                except ValueError:
                    pass
            for s in texts:
                s = s.lower()
                if any(m in s or (len(s) >= 6 and s in m) for m in forbidden_markers):
                    found.append(v)
    return found


def forbidden_markers(grants: RoleGrants, schema: dict[str, list[str]]) -> list[str]:
    return [marker(t, c, i).lower() for t, cols in schema.items() for c in cols
            if not grants.may_read(t, c) for i in range(ROWS_PER_TABLE)]


def test_hostile_statements_under_every_role(sources, tmp_path):
    report = {}
    for db_id, row, root in sources:
        path = root / "database" / db_id / f"{db_id}.sqlite"
        before_hash, before_rows = digest(path), row_counts(path)
        before_files = sorted(p.name for p in root.rglob("*"))
        db = open_database(db_id, row.schema_ddl, root)
        assert db.source == "spider" and db.has_data
        schema = {t.name: [c.name for c in t.columns] for t in parse_ddl(row.schema_ddl)}
        probes = read_probes(schema)
        refused = refused_statements(schema, tmp_path)
        for role in ROLES:
            grants = grants_for(row.policy, role)
            markers = forbidden_markers(grants, schema)
            counts = {"statements": len(probes) + len(refused), "denied": 0, "permitted": 0, "errors": 0}
            assert counts["statements"] >= 200
            for sql, reads in probes:
                kind, detail, result = outcome(db, grants, sql)
                if result is not None:
                    assert not leaked(result.rows, markers), (db_id, role, sql)
                expect_denied = not all(grants.may_read(t, c) if c != "rowid" else grants.tables.get(t, 0) is None
                                        for t, c in reads)
                if expect_denied:
                    assert kind == "deny", (db_id, role, sql, kind, detail)
                else:  # no more than PostgreSQL denies
                    assert kind == "permit", (db_id, role, sql, kind, detail)
                counts["denied" if kind == "deny" else "permitted" if kind == "permit" else "errors"] += 1
            for sql in refused:
                kind, detail, result = outcome(db, grants, sql)
                assert kind in ("deny", "error") and result is None, (db_id, role, sql, kind, detail)
                counts["denied" if kind == "deny" else "errors"] += 1
            report[f"{db_id}/{role}"] = counts
        # nothing was written: same bytes, same tables and rows, no new file beside it or where
        # VACUUM INTO / ATTACH pointed
        assert digest(path) == before_hash
        assert row_counts(path) == before_rows
        assert sorted(p.name for p in root.rglob("*")) == before_files
        assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())
        assert not Path("/tmp/pwned").exists()
    print(json.dumps(report))
    assert len(report) == 12


def test_a_database_built_from_ddl_stays_as_built(tmp_path):
    """The in-memory database built from schema_ddl: every role's writes are refused, and its tables
    are still there and still empty."""
    (row,) = load_rows(FIXTURE)[:1]
    db = open_database(row.db_id, row.schema_ddl, None)
    assert db.source == "ddl" and not db.has_data
    schema = {t.name: [c.name for c in t.columns] for t in parse_ddl(row.schema_ddl)}
    with db._trusted() as conn:
        before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    for role in ROLES:
        grants = grants_for(row.policy, role)
        for sql in refused_statements(schema, tmp_path):
            kind, _, result = outcome(db, grants, sql)
            assert kind in ("deny", "error") and result is None, (role, sql)
    with db._trusted() as conn:
        assert conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == before
        assert all(conn.execute(f"SELECT count(*) FROM {quote_ident(t)}").fetchone()[0] == 0 for t in schema)
    assert not any(tmp_path.iterdir())


TOKENS = ["SELECT", "FROM", "WHERE", "UNION", "ALL", "JOIN", "USING", "NATURAL", "ON", "AS", "WITH", "(", ")",
          ",", ";", "--", "/*", "*/", "'", '"', "`", "[", "]", "*", "=", "1", "x", "DROP", "TABLE", "DELETE",
          "INSERT", "ATTACH", "PRAGMA", "VACUUM", "sqlite_master", "main.", "temp.", "\n", "rowid", "EXPLAIN"]


def mutate(rng, sql: str, names: list[str]) -> str:
    toks = sql.split(" ")
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        pick = rng.choice(TOKENS + names)
        i = rng.randrange(len(toks) + 1)
        if op < 0.4:
            toks.insert(i, pick)
        elif op < 0.7 and len(toks) > 1:
            toks.pop(min(i, len(toks) - 1))
        else:
            toks[min(i, len(toks) - 1)] = pick
    return " ".join(toks)


def test_mutated_statements_never_crash_leak_or_write(sources, tmp_path):
    """Random token-level mutations of the read probes (seeded): the guard always answers (a result, a
    denial or an SQL error, never another exception), and still leaks and writes nothing."""
    import random
    rng = random.Random(1234)
    total = 0
    for db_id, row, root in sources:
        path = root / "database" / db_id / f"{db_id}.sqlite"
        before_hash = digest(path)
        db = open_database(db_id, row.schema_ddl, root)
        schema = {t.name: [c.name for c in t.columns] for t in parse_ddl(row.schema_ddl)}
        names = list(schema) + sorted({c for cols in schema.values() for c in cols})
        base = [sql for sql, _ in read_probes(schema)]
        for role in ROLES:
            grants = grants_for(row.policy, role)
            markers = forbidden_markers(grants, schema)
            for _ in range(300):
                sql = mutate(rng, rng.choice(base), names)
                kind, detail, result = outcome(db, grants, sql)
                assert kind in ("permit", "deny", "error")
                if result is not None:
                    assert not leaked(result.rows, markers), (db_id, role, sql)
                total += 1
        assert digest(path) == before_hash
    assert total == 3600 and not any(tmp_path.iterdir())
