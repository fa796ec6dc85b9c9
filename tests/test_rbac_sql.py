"""The role-aware text-to-SQL vertical: loader, grants, DDL, guard, scorer, generator and task. One file
over 400 lines: the vertical's parts are tested together against the same real Spider-AC sample."""
import json
import sqlite3
from pathlib import Path

import pytest

from conftest import SHARED_DATA, write_lines

from engine import ASSETS
from engine.errors import InputError
from engine.harness.interfaces import Call, get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import build_messages, run_episodes, summarize
from engine.tasks import get_task
from engine.tasks.rbac_sql import RbacSqlTask
from engine.tasks.rbac_sql.data import decision_of, load_rows
from engine.tasks.rbac_sql.database import build_from_ddl, open_database, parse_ddl, sqlite_ddl
from engine.tasks.rbac_sql.grants import grants_for, parse_policy, role_grant_sql
from engine.tasks.rbac_sql.guard import Guard, PermissionDenied, SqlError, guard_report, outcome
from engine.tasks.rbac_sql.scorer import result_eq, score_rbac, score_rbac_files
from engine.train.data import gold_conversations

FIXTURE = Path(__file__).parent / "fixtures" / "rbac_sql" / "department_store_8.jsonl"
REAL = SHARED_DATA / "rbac_text2sql" / "department_store_144.jsonl"
SPIDER = SHARED_DATA / "spider"
needs_real = pytest.mark.skipif(not (REAL.exists() and (SPIDER / "database").is_dir()),
                                reason="the shared Spider-AC sample is not here")
HARNESSES = ("rbac_sql_json", "rbac_sql_xml", "rbac_sql_tool_call")


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    d = tmp_path_factory.mktemp("rbac_gen")
    RbacSqlTask.generate(d, seed=5, sizes={"train": 80, "dev": 40})
    return d


def _row(**over):
    base = json.loads(FIXTURE.read_text().splitlines()[0])
    base.update(over)
    return base


# --------------------------------------------------------------------------- loader

def test_loader_reads_the_fixture_rows():
    rows = load_rows(FIXTURE)
    assert [r.line for r in rows] == list(range(1, 9))
    assert [r.decision for r in rows] == ["PERMIT", "DENY", "DENY", "DENY", "PERMIT", "DENY", "PERMIT", "DENY"]
    assert rows[2].grants.may_read("addresses", "address_id") and not rows[2].grants.may_read("addresses",
                                                                                               "address_details")
    assert decision_of("ERROR: permission denied for table x\n") == "DENY" and decision_of("[]") == "PERMIT"


@pytest.mark.parametrize("row, field", [
    ({"user": None}, "user"),
    ({"query": 3}, "query"),
    ({"query": "  "}, "query"),
    ({"decision": "MAYBE"}, "decision"),
    ({"decision": "DENY"}, "decision"),                     # contradicts a PERMIT label
    ({"ground_truth_label": 5}, "ground_truth_label"),
    ({"access_policy_sql": "GRANT USAGE ON SCHEMA s TO r;\nREVOKE SELECT ON s.t FROM r;"}, "access_policy_sql:2"),
    ({"schema_ddl": "CREATE TABLE t (a int);\nDROP TABLE t;"}, "schema_ddl:2"),
])
def test_loader_errors_name_file_line_and_field(tmp_path, row, field):
    good = _row()
    bad = _row(**row)
    if row.get("user", 1) is None:
        del bad["user"]
    path = write_lines(tmp_path / "rows.jsonl", [good, bad])
    with pytest.raises(InputError) as e:
        load_rows(path)
    assert e.value.line == 2 and e.value.field == field and str(path) in str(e.value)


def test_loader_rejects_bad_json_with_its_line(tmp_path):
    path = write_lines(tmp_path / "rows.jsonl", [_row(), "{not json"])
    with pytest.raises(InputError, match=r"rows.jsonl:2"):
        load_rows(path)


# --------------------------------------------------------------------------- grants

def test_grants_forms():
    policy = parse_policy("""GRANT USAGE ON SCHEMA shop TO shop_User_1, shop_User_2;
GRANT SELECT (a, "B") ON shop.t TO shop_User_1;
GRANT SELECT (c) ON TABLE shop.t TO shop_User_1 WITH GRANT OPTION;
GRANT SELECT ON shop.u, shop.v TO shop_User_2;
grant all privileges on shop.w to shop_user_3;
GRANT INSERT (x), SELECT (y) ON shop.x TO shop_User_4;
GRANT SELECT ON ALL TABLES IN SCHEMA shop TO admin;
GRANT SELECT (p) ON shop.pub TO PUBLIC;""", "shop")
    u1 = grants_for(policy, "User_1")
    assert u1.tables["t"] == {"a", "b", "c"} and "shop" in u1.schemas
    assert u1.may_read("T", "A") and not u1.may_read("t", "d") and u1.may_use("t") and not u1.may_use("u")
    u2 = grants_for(policy, "User_2")
    assert u2.tables["u"] is None and u2.may_read("v", "anything") and not u2.may_read("t", "a")
    assert grants_for(policy, "User_3").may_read("w", "z")
    assert grants_for(policy, "User_4").tables["x"] == {"y"}
    assert grants_for(policy, "admin").may_read("anything", "at_all")
    assert not grants_for(policy, "admin").may_read("sqlite_master", "sql")   # nobody's
    assert grants_for(policy, "User_9").may_read("pub", "p")                 # PUBLIC applies to all
    assert not grants_for(policy, "User_9").may_use("t")


@pytest.mark.parametrize("text, line", [
    ("GRANT SELECT (a) ON s.t TO r;\nREVOKE SELECT ON s.t FROM r;", 2),
    ("GRANT USAGE ON SCHEMA s TO r;\n\nGRANT SELECT (a ON s.t TO r;", 3),
    ("GRANT EXECUTE ON FUNCTION f TO r;", 1),
    ("GRANT SELECT ON s.t;", 1),
    ("GRANT SELECT ON s.t TO r extra;", 1),
    ("GRANT USAGE ON s.t TO r;", 1),
])
def test_unparseable_grants_name_the_line(text, line):
    with pytest.raises(InputError) as e:
        parse_policy(text)
    assert e.value.line == line and e.value.field == "access_policy_sql"


def test_a_roles_own_grant_lines():
    text = ("GRANT USAGE ON SCHEMA s TO s_User_1;\nGRANT SELECT (a) ON s.t TO s_User_2;\n"
            "GRANT SELECT (b) ON s.t TO s_User_1;")
    assert role_grant_sql(text, "User_1", "s").splitlines() == ["GRANT USAGE ON SCHEMA s TO s_User_1;",
                                                               "GRANT SELECT (b) ON s.t TO s_User_1;"]


# --------------------------------------------------------------------------- DDL

def test_ddl_with_names_sqlite_rejects_bare():
    ddl = ('CREATE TABLE "Stock" (id bigint, %_change_2007 double precision, "order" text, '
           "price numeric(10,2) NOT NULL DEFAULT 0, PRIMARY KEY (id));\n"
           "CREATE TABLE sqlite_sequence (name text, seq text);\nCREATE INDEX i ON Stock (id);")
    tables = parse_ddl(ddl)
    assert [(t.name, [c.name for c in t.columns]) for t in tables] == [
        ("Stock", ["id", "%_change_2007", "order", "price"]), ("sqlite_sequence", ["name", "seq"])]
    assert sqlite_ddl(tables) == ['CREATE TABLE "Stock" ("id" INTEGER, "%_change_2007" REAL, "order" TEXT, '
                                  '"price" NUMERIC)']
    db = build_from_ddl("stocks", ddl)
    policy = parse_policy('GRANT SELECT ("%_change_2007") ON s.stock TO r1;\nGRANT SELECT (id) ON s.stock TO r2;')
    assert Guard(db, grants_for(policy, "r1")).run('SELECT "%_change_2007" FROM stock').rows == []
    with pytest.raises(PermissionDenied, match="permission denied for table stock"):
        Guard(db, grants_for(policy, "r2")).run('SELECT "%_change_2007" FROM Stock')
    with pytest.raises(SqlError, match="no such table: sqlite_sequence"):   # reserved by SQLite: not built
        Guard(db, grants_for(policy, "r1")).run("SELECT * FROM sqlite_sequence")
    with pytest.raises(PermissionDenied, match="sqlite_master"):
        Guard(db, grants_for(policy, "r1")).run("SELECT name FROM sqlite_master")


# --------------------------------------------------------------------------- guard

@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    path = root / "database" / "small" / "small.sqlite"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE emp (id INTEGER PRIMARY KEY, name TEXT, salary INTEGER, dept INTEGER);"
                       "INSERT INTO emp VALUES (1, 'Ann', 10, 1), (2, 'Bo', 20, 2), (3, 'Cy', 30, 1);"
                       "CREATE TABLE dept (dept INTEGER, title TEXT);"
                       "INSERT INTO dept VALUES (1, 'Sales'), (2, 'Legal');"
                       "CREATE VIEW pay AS SELECT name, salary FROM emp;")
    conn.close()
    policy = parse_policy("GRANT SELECT (id, name) ON s.emp TO s_a;\nGRANT SELECT ON s.dept TO s_a;\n"
                          "GRANT SELECT ON s.pay TO s_a, s_c;\nGRANT SELECT (title) ON s.dept TO s_b;\n"
                          "GRANT SELECT ON s.emp TO s_c, s_d;", "s")
    return open_database("small", "", root), policy


def test_guard_follows_postgresql_read_rules(small_db):
    db, policy = small_db
    a, b = grants_for(policy, "a"), grants_for(policy, "b")
    assert Guard(db, a).run("SELECT name FROM emp ORDER BY id").rows == [("Ann",), ("Bo",), ("Cy",)]
    assert Guard(db, a).run("SELECT count(*) FROM emp").rows == [(3,)]     # any column privilege suffices
    assert Guard(db, b).run("SELECT count(*) FROM dept").rows == [(2,)]
    for role, sql, table in [(a, "SELECT * FROM emp", "emp"), (a, "SELECT name FROM emp WHERE salary > 1", "emp"),
                             (b, "SELECT count(*) FROM emp", "emp"),
                             (b, "SELECT title FROM dept JOIN emp USING (dept)", "dept"),
                             (a, "SELECT e.name FROM emp e JOIN dept d ON e.dept = d.dept", "emp"),
                             (b, "SELECT 1 FROM dept, emp", "emp")]:
        with pytest.raises(PermissionDenied, match=f"permission denied for table {table}$"):
            Guard(db, role).run(sql)
    # the error names the first table of the FROM list that fails, as PostgreSQL does
    assert outcome(db, b, "SELECT e.name FROM emp e JOIN dept d ON d.dept = e.dept")[1] == \
        "permission denied for table emp"
    assert outcome(db, b, "SELECT d.dept FROM dept d UNION SELECT salary FROM emp")[1] == \
        "permission denied for table dept"


def test_a_view_is_checked_by_its_grant_and_by_what_it_reads(small_db):
    db, policy = small_db
    assert "pay" in db.views
    assert Guard(db, grants_for(policy, "c")).run("SELECT name FROM pay ORDER BY name").rows[0] == ("Ann",)
    with pytest.raises(PermissionDenied, match="for table emp$"):     # the view reads emp.salary underneath
        Guard(db, grants_for(policy, "a")).run("SELECT name FROM pay")
    with pytest.raises(PermissionDenied, match="for table pay$"):     # every emp column, but not the view
        Guard(db, grants_for(policy, "d")).run("SELECT name FROM pay")


def test_guard_limits_rows_and_time(small_db):
    db, policy = small_db
    a = grants_for(policy, "a")
    res = Guard(db, a, max_rows=2).run("SELECT name FROM emp ORDER BY id")
    assert res.rows == [("Ann",), ("Bo",)] and res.truncated and res.columns == ["name"]
    with pytest.raises(SqlError, match="statement timeout"):
        Guard(db, a, timeout_s=0.05).run("SELECT count(*) FROM emp a, emp b, emp c, emp d, emp e, emp f, emp g, "
                                         "emp h, emp i, emp j, emp k, emp l, emp m, emp n, emp o, emp p")
    with pytest.raises(SqlError, match="one statement"):
        Guard(db, a).run("SELECT 1; SELECT 2")
    with pytest.raises(SqlError, match="no such column"):
        Guard(db, a).run("SELECT nope FROM emp")


@needs_real
@pytest.mark.parametrize("spider", [SPIDER, None], ids=["spider_sqlite", "schema_ddl"])
def test_guard_agrees_with_every_label_of_the_sample(spider):
    report = guard_report(REAL, spider_dir=spider)
    assert report["rows"] == 144 and report["agree"] == 144 and report["disagreements"] == []
    assert report["deny_same_message"] == report["deny_rows"] == 90
    assert report["sources"] == {"spider" if spider else "ddl": 144}


def test_guard_report_lists_disagreements(tmp_path):
    rows = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    rows[0]["ground_truth_label"] = "ERROR: permission denied for table addresses\n"   # a wrong label
    rows[0]["decision"] = "DENY"
    report = guard_report(write_lines(tmp_path / "g.jsonl", rows))
    assert report["agree"] == 7 and report["agreement"] == 7 / 8
    (d,) = report["disagreements"]
    assert d["line"] == 1 and d["index"] == 0 and d["role"] == "User_1" and d["guard"] == "permit"


# --------------------------------------------------------------------------- scorer

def test_result_eq_is_spiders_execution_match():
    assert result_eq([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], order_matters=False)
    assert not result_eq([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], order_matters=True)
    assert result_eq([(1, "a")], [("a", 1)], order_matters=True)         # columns in another order
    assert not result_eq([(1,), (1,)], [(1,)], order_matters=False)      # a multiset
    assert result_eq([], [], order_matters=False)


@needs_real
def test_gold_as_prediction_scores_one_on_the_sample(tmp_path):
    rows = load_rows(REAL)
    pred = write_lines(tmp_path / "pred.jsonl", [
        {"line": r.line - 1, **({"refuse": True} if r.decision == "DENY" else {"sql": r.query})} for r in rows])
    m = score_rbac_files(REAL, pred, spider_dir=SPIDER)
    assert m["decision_accuracy"] == m["execution_accuracy"] == m["success"] == 1.0
    assert m["execution_rows"] == 54 and m["false_permit_rate"] == 0.0 and m["refusal_f1"] == 1.0


def test_gold_as_prediction_scores_one_on_generated_data(gen):
    rows = load_rows(gen / "dev.jsonl")
    preds = [{"refuse": True} if r.decision == "DENY" else {"sql": r.query} for r in rows]
    m = score_rbac(rows, preds, spider_dir=gen)
    assert m["decision_accuracy"] == m["execution_accuracy"] == m["success"] == 1.0
    assert m["execution_rows"] == m["permit_rows"] > 0


def test_partial_credit_by_hand(tmp_path):
    """8 fixture rows: PERMIT lines 0, 4, 6; DENY lines 1, 2, 3, 5, 7. From the DDL (no data) execution
    is checked only for running."""
    pred = write_lines(tmp_path / "pred.jsonl", [
        {"line": 0, "sql": "SELECT address_details FROM addresses"},                  # PERMIT answered: right
        {"line": 4, "refuse": True},                                                  # PERMIT refused: wrong
        {"line": 6, "sql": "SELECT customer_name FROM customers"},                    # answered, guard denies
        {"line": 1, "refuse": True},                                                  # DENY refused: right
        {"line": 2, "refuse": True},                                                  # right
        {"line": 3, "sql": "SELECT address_id FROM addresses"},                       # DENY answered, no data
        # line 5 missing: wrong
        {"line": 7, "sql": "SELECT nope FROM customers"},                             # answered, an error
    ])
    m = score_rbac_files(FIXTURE, pred)
    assert m["n"] == 8 and m["permit_rows"] == 3 and m["deny_rows"] == 5
    assert m["decision_accuracy"] == 4 / 8          # lines 0, 6 (answered), 1, 2
    assert m["refusal_precision"] == 2 / 3          # refused 4, 1, 2
    assert m["refusal_recall"] == 2 / 5
    assert m["refusal_f1"] == pytest.approx(2 * (2 / 3) * (2 / 5) / (2 / 3 + 2 / 5))
    assert m["success"] == 3 / 8                    # lines 0, 1, 2 (line 6's SQL is denied)
    assert m["false_permit_rate"] == 0.0            # line 3 ran but the empty database returned nothing
    assert m["execution_accuracy"] is None and m["execution_rows"] == 0
    assert m["answers_denied_by_guard"] == 2 and m["no_prediction"] == 1


def test_partial_credit_with_data(gen):
    rows = load_rows(gen / "dev.jsonl")
    permit = [r for r in rows if r.decision == "PERMIT" and not r.query.startswith("SELECT count")][:2]
    deny = [r for r in rows if r.decision == "DENY"][:2]
    # a DENY row answered with SQL the role may run (a leak of a permitted column the question did not ask)
    readable = deny[0].grants.readable(deny[0].schema)
    t, cols = next(iter(readable.items()))
    preds = [{"sql": permit[0].query}, {"sql": permit[1].query + " LIMIT 0"},
             {"sql": f"SELECT {cols[0]} FROM {t}"}, {"refuse": True}]
    m = score_rbac(permit + deny[:2], preds, spider_dir=gen)
    assert m["execution_accuracy"] == 0.5 and m["execution_rows"] == 2
    assert m["false_permit_rate"] == 0.5 and m["decision_accuracy"] == 0.75 and m["success"] == 0.5


@pytest.mark.parametrize("row, field", [
    ({"sql": "SELECT 1"}, "line"),
    ({"line": "0", "sql": "SELECT 1"}, "line"),
    ({"line": 99, "sql": "SELECT 1"}, "line"),
    ({"line": 0}, "refuse"),
    ({"line": 0, "sql": "SELECT 1", "refuse": True}, "sql"),
    ({"line": 0, "refuse": False}, "refuse"),
    ({"line": 0, "sql": 7}, "sql"),
    ({"line": 0, "sql": "x", "why": 1}, "why"),
])
def test_prediction_errors_name_line_and_field(tmp_path, row, field):
    pred = write_lines(tmp_path / "pred.jsonl", [{"line": 1, "refuse": True}, row])
    with pytest.raises(InputError) as e:
        score_rbac_files(FIXTURE, pred)
    assert e.value.line == 2 and e.value.field == field


def test_a_second_prediction_for_a_line_is_an_error(tmp_path):
    pred = write_lines(tmp_path / "pred.jsonl", [{"line": 1, "refuse": True}, {"line": 1, "sql": "SELECT 1"}])
    with pytest.raises(InputError, match="second prediction"):
        score_rbac_files(FIXTURE, pred)


# --------------------------------------------------------------------------- generator

def test_generator_is_deterministic_and_its_labels_agree_with_the_guard(gen, tmp_path):
    RbacSqlTask.generate(tmp_path, seed=5, sizes={"train": 80, "dev": 40})
    for split in ("train", "dev"):
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (gen / f"{split}.jsonl").read_bytes()
    for db_dir in (gen / "database").iterdir():
        dumps = []
        for root in (gen, tmp_path):
            conn = sqlite3.connect(root / "database" / db_dir.name / f"{db_dir.name}.sqlite")
            dumps.append(list(conn.iterdump()))
            conn.close()
        assert dumps[0] == dumps[1]
    other = tmp_path / "other"
    RbacSqlTask.generate(other, seed=6, sizes={"train": 80})
    assert (other / "train.jsonl").read_bytes() != (gen / "train.jsonl").read_bytes()
    for spider in (gen, None):
        report = guard_report(gen / "train.jsonl", spider_dir=spider)
        assert report["agreement"] == 1.0, report["disagreements"][:3]
    rows = load_rows(gen / "train.jsonl")
    share = sum(r.decision == "DENY" for r in rows) / len(rows)
    assert 0.35 <= share <= 0.65
    assert {r.user for r in rows} == {"User_1", "User_2", "User_3", "User_4"} and len({r.db_id for r in rows}) == 5
    assert len({(r.db_id, r.user, r.question) for r in rows}) == len(rows)
    for r in rows:
        assert 2 <= len(r.schema) <= 4 and all(len(c) <= 5 for c in r.schema.values())
        if r.decision == "PERMIT":
            assert len(json.loads(r.label)) <= 5
        else:
            assert r.label.startswith("ERROR: permission denied for table ")


# --------------------------------------------------------------------------- task

def test_the_task_registers_and_loads(gen):
    task = get_task("rbac_sql", gen)
    items = task.load("dev")
    assert len(items) == 40 and {i.category for i in items} == {"PERMIT", "DENY"}
    assert task.load("dev", limit=3)[2].id == "dev:3"
    assert items[0].context.spider_dir == gen and items[0].context.database.source == "spider"
    with pytest.raises(InputError, match="no split"):
        task.load("nope")


def test_a_constrained_turn_is_one_call(gen):
    """A turn runs one query or refuses: under constrained decoding a second call is no part of the answer."""
    from engine.tasks.rbac_sql.task import REFUSE, SQL
    task = get_task("rbac_sql", gen)
    item = task.load("dev")[0]
    spec = HarnessSpec.load(ASSETS / "harnesses" / "rbac_sql_json.yaml")
    spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"constrain_calls": True})})
    iface = get_interface("json")
    query = Call(SQL, {"query": "SELECT 1"})

    class TwoCalls:
        tokenizer = staticmethod(lambda text, add_special_tokens=False: {"input_ids": text.split()})

        def chat_prompt(self, messages):
            return "prompt"

        def generate(self, prompts, **kw):
            return [(iface.render([query, Call(REFUSE, {})]), 9) for _ in prompts]

        def next_tokens(self, prompt, *, n):
            return []

    [episode] = run_episodes(spec, task, TwoCalls(), [item])
    turn = episode.turns[0]
    assert turn.output == iface.render([query]) and turn.constrained == 1 and not turn.mismatch


def test_context_views(gen):
    task = get_task("rbac_sql", gen)
    item = next(i for i in task.load("dev") if i.meta["user"] == "User_3")
    row = item.context.row
    role_view = task.context(item, {})
    lines = role_view.splitlines()
    assert lines[:2] == [f"Database: {row.db_id}. You are connected as User_3.", "Tables and columns you may read:"]
    shown = {ln.split("(")[0]: ln.split("(")[1].rstrip(")").split(", ") for ln in lines[2:]}
    assert shown == row.grants.readable(row.schema) and shown   # exactly what the role may read
    assert any(set(cols) != set(shown.get(t, [])) for t, cols in row.schema.items())
    assert "CREATE TABLE" not in role_view
    full = task.context(item, {"schema_view": "full", "show_role": False})
    assert "CREATE TABLE" in full and f"TO {row.db_id}_User_3;" in full and "You are connected" not in full
    assert "User_1;" not in full


@pytest.mark.parametrize("options, field", [
    ({"schema_view": "everything"}, "task_options.schema_view"),
    ({"show_role": "yes"}, "task_options.show_role"),
    ({"window": 3}, "task_options.window"),
])
def test_bad_task_options_name_the_field(gen, options, field):
    task = get_task("rbac_sql", gen)
    item = task.load("dev", limit=1)[0]
    with pytest.raises(InputError) as e:
        task.context(item, options)
    assert e.value.field == field
    with pytest.raises(InputError):
        task.environment(item, options)


@pytest.mark.parametrize("call, reason", [
    (Call("sql", {"query": "SELECT 1"}), None),
    (Call("refuse"), None),
    (Call("refuse", {"reason": "no grant on salary"}), None),
    (Call("select", {"query": "SELECT 1"}), "unknown tool 'select'"),
    (Call("sql"), "wrong arguments for sql"),
    (Call("sql", {"sql": "SELECT 1"}), "wrong arguments for sql"),
    (Call("sql", {"query": "SELECT 1", "role": "User_1"}), "wrong arguments for sql"),
    (Call("sql", {"query": "   "}), "non-empty string"),
    (Call("sql", {"query": 5}), "non-empty string"),
    (Call("refuse", {"because": "x"}), "wrong arguments for refuse"),
    (Call("refuse", {"reason": 3}), "reason must be a string"),
])
def test_check_call(gen, call, reason):
    task = get_task("rbac_sql", gen)
    item = task.load("dev", limit=1)[0]
    got = task.check_call(call, item)
    assert (got is None) if reason is None else (reason in got)


def test_gold_calls_succeed_through_the_environment(gen):
    task = get_task("rbac_sql", gen)
    items = task.load("dev")
    preds = []
    for item in items:
        (call,) = task.gold_calls(item)
        assert call.name == ("refuse" if item.category == "DENY" else "sql")
        result = task.environment(item, {"schema_view": "full"}).step([call])
        assert result.done and result.success and result.reward == 1.0, (item.id, result.feedback)
        assert result.feedback.startswith("Refused" if call.name == "refuse" else "OK")
        preds.append(result.prediction)
    score, metrics = task.score(items, preds)
    assert score == 1.0 and metrics["decision_accuracy"] == 1.0 and metrics["false_permit_rate"] == 0.0


def test_the_environment_reports_the_guards_verdict(gen):
    task = get_task("rbac_sql", gen)
    items = task.load("dev")
    deny = next(i for i in items if i.category == "DENY")
    permit = next(i for i in items if i.category == "PERMIT")
    r = task.environment(deny).step([Call("sql", {"query": deny.gold["query"]})])
    assert r.feedback == deny.gold["label"].strip() and not r.success and r.prediction == {"sql": deny.gold["query"]}
    r = task.environment(permit).step([Call("refuse")])
    assert not r.success and r.prediction == {"refuse": True}
    table = next(iter(permit.context.row.schema))
    r = task.environment(permit).step([Call("sql", {"query": f"DROP TABLE {table}"})])
    assert r.feedback.startswith("ERROR: permission denied") and not r.success
    r = task.environment(permit).step([Call("sql", {"query": "SELEC 1"})])
    assert r.feedback.startswith("ERROR: near") and not r.success
    r = task.environment(permit).step([Call("select", {"query": "SELECT 1"})])   # not checked by check_call
    assert r.done and not r.success and r.prediction == {"invalid": "select"}
    r = task.environment(permit).step([Call("refuse"), Call("refuse")])
    assert r.done and not r.success and "exactly one call" in r.feedback
    score, metrics = task.score([deny, permit], [None, {"invalid": "2 calls"}])
    assert score == 0.0 and metrics["no_prediction"] == 2


@pytest.mark.parametrize("name", HARNESSES)
@pytest.mark.parametrize("view", ["role", "full"])
def test_gold_conversations_for_every_seed_harness(gen, name, view):
    task = get_task("rbac_sql", gen)
    items = task.load("train")
    spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
    spec = spec.model_copy(update={"task_options": {**spec.task_options, "schema_view": view}})
    assert spec.task == "rbac_sql" and spec.name == name.replace("rbac_sql_", "rbac_sql-")
    rows = gold_conversations(spec, task, items)
    iface = get_interface(spec.interface.name)
    for item, row in zip(items, rows):
        msgs = row["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
        assert msgs[1]["content"] == item.input
        assert iface.parse(msgs[2]["content"]) == task.gold_calls(item)
        # small enough for the tiny model's 1024 positions
        assert sum(len(m["content"]) for m in msgs) < (1400 if view == "full" else 900)


class GoldBackend:
    """Answers each episode with its gold calls rendered in `spec`'s interface (prompts from `prompt_spec`)."""

    def __init__(self, task, items, spec, prompt_spec=None):
        iface = get_interface(spec.interface.name)
        self.answers = {(build_messages(prompt_spec or spec, task, i)[0]["content"], i.input):
                        iface.render(task.gold_calls(i)) for i in items}

    def chat_prompt(self, messages):
        return json.dumps(messages)

    def generate(self, prompts, **kw):
        out = []
        for p in prompts:
            m = json.loads(p)
            out.append((self.answers[(m[0]["content"], m[-1]["content"])], 9))
        return out


@pytest.mark.parametrize("name", HARNESSES)
def test_run_episodes_on_gold_outputs(gen, name):
    task = get_task("rbac_sql", gen)
    items = task.load("dev")
    spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
    episodes = run_episodes(spec, task, GoldBackend(task, items, spec), items)
    stats = summarize(episodes)
    assert stats["timr"] == 0.0 and stats["turns"] == len(items)
    assert all(e.success for e in episodes)
    score, metrics = task.score(items, [e.prediction for e in episodes])
    assert score == 1.0 and metrics["execution_accuracy"] == 1.0


def test_answers_in_another_interface_are_mismatches(gen):
    task = get_task("rbac_sql", gen)
    items = task.load("dev")[:8]
    json_spec = HarnessSpec.load(ASSETS / "harnesses" / "rbac_sql_json.yaml")
    xml_spec = HarnessSpec.load(ASSETS / "harnesses" / "rbac_sql_xml.yaml")
    episodes = run_episodes(json_spec, task, GoldBackend(task, items, xml_spec, json_spec), items)
    assert summarize(episodes)["timr"] == 1.0 and not any(e.success for e in episodes)


@needs_real
def test_the_task_on_the_real_sample_finds_the_spider_databases():
    task = get_task("rbac_sql", REAL.parent)
    items = task.load(str(REAL))
    assert len(items) == 144 and items[0].context.spider_dir == SPIDER
    preds = [task.environment(i).step(task.gold_calls(i)).prediction for i in items]
    score, metrics = task.score(items, preds)
    assert score == 1.0 and metrics["execution_accuracy"] == 1.0 and metrics["execution_rows"] == 54
    assert "customers(customer_id, payment_method_code, customer_code)" in task.context(items[34], {})
