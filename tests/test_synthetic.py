"""The synthetic archive generator: the real schema, consistent counts, sound lineage, deterministic."""
import hashlib
import json

import networkx as nx
import pytest

from engine.archive import Archive
from engine.archive.store import spec_hash
from engine.harness.spec import HarnessSpec
from engine.testing.synthetic import build_synthetic

SMALL = dict(harnesses=12, checkpoints=10, evaluations=200, turns=4000)
TASKS = ("smart_home", "failure_attribution", "rbac_sql")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "archive.db"
    counts = build_synthetic(path, **SMALL)
    return path, counts


@pytest.fixture(scope="module")
def archive(small):
    with Archive(small[0], readonly=True) as a:
        yield a


def _dump_sha(path) -> str:
    """A digest of the tables whose rows carry no file paths (those differ with the archive's folder)."""
    with Archive(path, readonly=True) as a:
        h = hashlib.sha256()
        for table in ("harnesses", "harness_parents", "checkpoint_parents", "evaluations", "episodes", "turns",
                      "rounds", "round_steps", "decisions"):
            for row in a.conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2"):
                h.update(repr(tuple(row)).encode())
        return h.hexdigest()


def test_counts_match_the_rows(small, archive):
    _, counts = small
    for table in ("harnesses", "checkpoints", "evaluations", "episodes", "turns", "decisions", "jobs", "rounds"):
        n = archive.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        assert n == counts[table], table
    assert counts["turns"] == SMALL["turns"] and counts["evaluations"] == SMALL["evaluations"]
    assert counts["seconds"] > 0 and counts["bytes"] > 0
    assert archive.version() == 1                       # bumped once, at the end
    assert archive.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_existing_file_is_not_overwritten_unless_asked(small):
    with pytest.raises(FileExistsError):
        build_synthetic(small[0], **SMALL)


def test_harness_lineage_is_a_dag_of_real_specs(archive):
    dag = archive.harness_lineage()
    assert nx.is_directed_acyclic_graph(dag)
    rows = archive.query("SELECT * FROM harnesses ORDER BY rowid")
    assert len({r["spec_hash"] for r in rows}) == len(rows)
    assert [(r["id"], r["interface"], r["creator"]) for r in rows[:3]] == [
        ("h1", "json", "seed"), ("h2", "xml", "seed"), ("h3", "tool_call", "seed")]
    for r in rows:
        spec = json.loads(r["spec"])
        HarnessSpec.from_dict(spec)                     # a valid spec
        assert spec_hash(json.dumps(spec, sort_keys=True)) == r["spec_hash"]
        assert spec["interface"]["name"] == r["interface"]
        parents = list(dag.predecessors(r["id"]))
        if r["creator"] == "seed":
            assert parents == [] and r["round"] is None
            continue
        assert r["creator"] in ("editor:offline", "editor:llm") and r["rationale"] and r["round"] >= 1
        assert 1 <= len(parents) <= 2
        # the edit changed something besides the name
        parent = archive.harness(archive.harness(r["id"])["parents"][0])["spec"]
        strip = lambda s: {k: v for k, v in s.items() if k != "name"}  # noqa: E731
        assert strip(spec) != strip(parent) or len(parents) == 2


def test_checkpoint_lineage_is_a_dag_and_merges_have_models_and_a_base(tmp_path):
    # more checkpoints than rounds, so rounds train several and some are merged
    path = tmp_path / "merges.db"
    build_synthetic(path, harnesses=20, checkpoints=60, evaluations=60, turns=600, rounds=5)
    with Archive(path, readonly=True) as a:
        dag = a.checkpoint_lineage()
        assert nx.is_directed_acyclic_graph(dag)
        kinds = {c["id"]: c["kind"] for c in a.checkpoints()}
        assert kinds["c1"] == "base" and kinds["c2"] == kinds["c3"] == "sft"
        merges = [c for c, k in kinds.items() if k == "merge"]
        assert merges
        for cid in merges:
            roles = {}
            for parent in dag.predecessors(cid):
                roles.setdefault(dag.edges[parent, cid]["role"], []).append(parent)
            assert len(roles["model"]) >= 2 and len(roles["base"]) == 1
            base = roles["base"][0]
            assert all(base in nx.ancestors(dag, m) for m in roles["model"])
            recipe = a.checkpoint(cid)["recipe"]
            assert recipe["mergekit"]["merge_method"] == "ties" and recipe["base"] == base
        for c in a.checkpoints():
            if c["kind"] == "sft":
                parents = a.checkpoint(c["id"])["parents"]
                assert [p["role"] for p in parents] == ["init"] and c["harness_id"] and c["dataset_id"]
                if c["round"]:
                    assert a.dataset(c["dataset_id"])["source"] == "rejection"
                    assert (a.harness(c["harness_id"])["round"] or 0) <= c["round"]


def test_evaluation_counts_are_the_sums_over_their_turns(archive):
    turns = {r["evaluation_id"]: r for r in archive.query(
        "SELECT evaluation_id, COUNT(*) AS n, SUM(mismatch) AS m, SUM(tokens) AS tok FROM turns GROUP BY 1")}
    eps = {r["evaluation_id"]: r for r in archive.query(
        "SELECT evaluation_id, COUNT(*) AS n, SUM(success) AS ok FROM episodes GROUP BY 1")}
    evals = archive.query("SELECT * FROM evaluations")
    assert len(evals) == SMALL["evaluations"]
    for e in evals:
        t = turns[e["id"]]
        assert (e["turns"], e["mismatched_turns"], e["tokens"]) == (t["n"], t["m"], t["tok"])
        assert e["timr"] == pytest.approx(t["m"] / t["n"])
        assert e["episodes"] == eps[e["id"]]["n"]
        assert e["score"] == pytest.approx(eps[e["id"]]["ok"] / e["episodes"])
        assert 0 <= e["score"] <= 1
        assert json.loads(e["metrics"])["overall"]["success"] == pytest.approx(e["score"])


def test_episodes_agree_with_their_turns(archive):
    rows = archive.query(
        "SELECT ep.turns, ep.mismatched_turns, ep.success, ep.reward, COUNT(t.turn) AS n, SUM(t.mismatch) AS m, "
        "SUM(t.reward) AS r, MAX(t.turn) AS last FROM episodes ep JOIN turns t "
        "ON t.evaluation_id = ep.evaluation_id AND t.episode = ep.idx GROUP BY ep.evaluation_id, ep.idx")
    assert len(rows) == archive.conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    for r in rows:
        assert (r["turns"], r["mismatched_turns"], r["last"]) == (r["n"], r["m"], r["n"] - 1)
        assert r["reward"] == pytest.approx(r["r"])  # the task's rewards, partial credit included
        assert r["success"] in (0, 1) and (r["reward"] > 0 or not r["success"])
    bad = archive.query("SELECT COUNT(*) AS n FROM turns WHERE (mismatch = 1) != (action IS NULL) "
                        "OR (mismatch = 1) != (parse_error IS NOT NULL)")
    assert bad[0]["n"] == 0


def test_mismatch_follows_interface_agreement(archive):
    """The phenomenon the dashboard shows: a checkpoint trained under another interface mismatches."""
    rows = archive.query(
        "SELECT e.timr, h.interface = th.interface AS agree FROM evaluations e "
        "JOIN harnesses h ON h.id = e.harness_id JOIN checkpoints c ON c.id = e.checkpoint_id "
        "JOIN harnesses th ON th.id = c.harness_id WHERE c.kind = 'sft'")
    agree = [r["timr"] for r in rows if r["agree"]]
    disagree = [r["timr"] for r in rows if not r["agree"]]
    assert agree and disagree
    assert sum(agree) / len(agree) + 0.2 < sum(disagree) / len(disagree)


def test_rounds_steps_and_pending_decisions(archive):
    rounds = archive.rounds()
    assert [r["state"] for r in rounds] == ["done"] * (len(rounds) - 1) + ["running"]
    for r in rounds[:-1]:
        steps = {s["step"]: json.loads(s["result"]) for s in archive.round_steps(r["id"])}
        assert set(steps) == {"curate", "edit", "inherit", "sample", "sft", "evaluate"}
        assert archive.harness(steps["edit"]["harness"])["round"] == r["id"]
        assert archive.checkpoint(steps["sft"]["checkpoint"])["round"] == r["id"]
        assert archive.decision(steps["curate"]["decision"])["choice"] == steps["curate"]["parents"][0]
        assert archive.decision(steps["inherit"]["decision"])["choice"] == steps["inherit"]["checkpoint"]
    pending = archive.decisions("proposed")
    assert len(pending) == 3
    assert all(d["round_id"] == rounds[-1]["id"] and d["decided_at"] is None for d in pending)
    assert {d["kind"] for d in archive.decisions()} == {"parents", "inheritance"}
    settled = [d for d in archive.decisions() if d["status"] != "proposed"]
    assert all(d["decided_at"] for d in settled)
    assert {j["state"] for j in archive.query("SELECT state FROM jobs")} >= {"done", "failed", "running"}


def test_matrix_has_rows_for_every_task_and_split(archive):
    for task in TASKS:
        for split in ("dev", "test"):
            rows = archive.matrix(task, split)
            assert rows, (task, split)
            assert all(0 <= r["score"] <= 1 and 0 <= r["timr"] <= 1 for r in rows)


def test_deterministic_for_a_seed(small, tmp_path):
    again = tmp_path / "again.db"
    build_synthetic(again, **SMALL)
    assert _dump_sha(again) == _dump_sha(small[0])
    other = tmp_path / "other.db"
    build_synthetic(other, **SMALL, seed=1)
    assert _dump_sha(other) != _dump_sha(small[0])


def test_turns_are_judged_as_their_task_judges_them(small, archive):
    """Every synthetic turn's output gets the verdict (and the reason) the task's own judge gives it."""
    from engine.harness.interfaces import Call
    from engine.rollout import judge
    from engine.tasks import get_task
    from engine.testing.synthetic.items import IFACES, seed_specs
    for name in TASKS:
        task = get_task(name, archive.files_dir / "tasks" / name)
        items = {i.id: i for split in ("dev", "test") for i in task.load(split)}
        specs = dict(zip(IFACES, seed_specs(name)))
        rows = archive.query(
            "SELECT e.item_id, e.success, t.episode, t.turn, t.evaluation_id, t.output, t.action, t.mismatch, "
            "t.parse_error, h.interface, h.spec FROM turns t JOIN episodes e ON e.evaluation_id = t.evaluation_id "
            "AND e.idx = t.episode JOIN evaluations v ON v.id = t.evaluation_id JOIN harnesses h ON h.id = v.harness_id "
            "WHERE v.task = ? ORDER BY t.evaluation_id, t.episode, t.turn LIMIT 400", (name,))
        assert rows, name
        episodes: dict = {}
        for r in rows:
            spec = specs[r["interface"]].model_copy(update={"strict": json.loads(r["spec"])["strict"]})
            calls, error, _ = judge(spec, task, items[r["item_id"]], r["output"])
            assert error == r["parse_error"] and bool(r["mismatch"]) == (error is not None), r
            if calls is not None:
                assert [c.to_dict() for c in calls] == json.loads(r["action"])
            episodes.setdefault((r["evaluation_id"], r["episode"]), []).append(r)
        # a successful episode's actions, played through the task's environment, succeed
        played = 0
        for turns in episodes.values():
            if not turns[0]["success"] or turns[0]["turn"] != 0:
                continue
            item = items[turns[0]["item_id"]]
            env = task.environment(item, specs["json"].task_options)
            for t in turns:
                if not t["mismatch"]:
                    result = env.step([Call(c["name"], c["args"]) for c in json.loads(t["action"])])
            assert result.success, turns
            played += 1
        assert played > 0, name
