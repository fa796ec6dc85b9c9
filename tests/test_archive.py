import sqlite3

import pytest

from engine.archive import Archive, ArchiveError
from engine.archive.lineage import lowest_common_ancestor
from engine.archive.schema import SCHEMA_VERSION

SPEC = {"name": "h", "interface": {"name": "json"}}


def _eval(archive, h, c, score=0.5, timr=0.1, turns=2):
    return archive.add_evaluation(
        dict(harness_id=h, checkpoint_id=c, task="t", split="dev", score=score, metrics={"x": 1}, episodes=1,
             turns=turns, mismatched_turns=int(timr * turns), timr=timr, tokens=10, seconds=0.1),
        [dict(idx=0, item_id="i", sample=0, success=1, reward=1.0, turns=turns, mismatched_turns=0, prediction=None)],
        [dict(episode=0, turn=t, prompt="p", output="o", action=None, parse_error=None, mismatch=0, feedback="",
              reward=0.0, tokens=5) for t in range(turns)])


def test_new_archive_is_wal_with_current_schema(archive):
    assert archive.schema_version() == SCHEMA_VERSION
    assert archive.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert archive.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


def test_reopening_does_not_migrate_again(tmp_path):
    Archive(tmp_path / "a.db").add_harness(SPEC, creator="seed")
    again = Archive(tmp_path / "a.db")
    assert len(again.harnesses()) == 1


def test_same_spec_is_one_harness_and_parents_keep_order(archive):
    a = archive.add_harness(SPEC, creator="seed")
    assert archive.add_harness(dict(SPEC), creator="seed") == a
    b = archive.add_harness({**SPEC, "name": "b"}, creator="seed")
    c = archive.add_harness({**SPEC, "name": "c"}, creator="editor:offline", parents=[b, a], rationale="cross")
    assert archive.harness(c)["parents"] == [b, a]
    assert archive.harness("c")["id"] == c
    dag = archive.harness_lineage()
    assert set(dag.predecessors(c)) == {a, b}


def test_every_write_bumps_the_version(archive):
    v0 = archive.version()
    h = archive.add_harness(SPEC, creator="seed")
    c = archive.add_checkpoint(name="base", path="/m", kind="base")
    _eval(archive, h, c)
    assert archive.version() == v0 + 3


def test_checkpoint_lineage_and_lowest_common_ancestor(archive):
    base = archive.add_checkpoint(name="base", path="/b", kind="base")
    root = archive.add_checkpoint(name="root", path="/r", kind="sft", parents=[(base, "init")])
    a = archive.add_checkpoint(name="a", path="/a", kind="sft", parents=[(root, "init")])
    b = archive.add_checkpoint(name="b", path="/b2", kind="sft", parents=[(root, "init")])
    m = archive.add_checkpoint(name="m", path="/m", kind="merge", parents=[(a, "model"), (b, "model"), (root, "base")])
    dag = archive.checkpoint_lineage()
    assert set(dag.predecessors(m)) == {a, b, root}
    assert lowest_common_ancestor(dag, [a, b]) == root
    assert {p["role"] for p in archive.checkpoint(m)["parents"]} == {"model", "base"}


def test_unknown_parent_rolls_the_whole_write_back(archive):
    with pytest.raises(ArchiveError):
        archive.add_checkpoint(name="x", path="/x", kind="sft", parents=[("c99", "init")])
    assert archive.checkpoints() == []


def test_failed_evaluation_write_leaves_nothing(archive):
    h = archive.add_harness(SPEC, creator="seed")
    c = archive.add_checkpoint(name="base", path="/m", kind="base")
    bad_turn = dict(episode=0, turn=0, prompt="p")  # NOT NULL columns missing
    with pytest.raises(sqlite3.IntegrityError):
        archive.add_evaluation(dict(harness_id=h, checkpoint_id=c, task="t", split="dev", score=0, metrics={},
                                    episodes=1, turns=1, mismatched_turns=0, timr=0, tokens=0, seconds=0),
                               [], [bad_turn])
    assert archive.evaluations() == []
    assert archive.query("SELECT COUNT(*) AS n FROM turns")[0]["n"] == 0


def test_matrix_takes_the_newest_evaluation_of_each_pair(archive):
    h = archive.add_harness(SPEC, creator="seed")
    c1 = archive.add_checkpoint(name="c1", path="/1", kind="base")
    c2 = archive.add_checkpoint(name="c2", path="/2", kind="base")
    _eval(archive, h, c1, score=0.1)
    newest = _eval(archive, h, c1, score=0.9)
    _eval(archive, h, c2, score=0.3)
    cells = {r["checkpoint"]: r for r in archive.matrix("t", "dev")}
    assert cells[c1]["id"] == newest and cells[c1]["score"] == 0.9
    assert cells[c2]["score"] == 0.3
    plan = " ".join(r[3] for r in archive.conn.execute(
        "EXPLAIN QUERY PLAN SELECT harness_id, checkpoint_id, MAX(id), score, timr, episodes, mismatch_kinds "
        "FROM evaluations WHERE task = 't' AND split = 'dev' GROUP BY harness_id, checkpoint_id"))
    assert "COVERING INDEX evaluations_cells" in plan


def test_turns_come_back_in_order(archive):
    h = archive.add_harness(SPEC, creator="seed")
    c = archive.add_checkpoint(name="base", path="/m", kind="base")
    eid = _eval(archive, h, c, turns=3)
    assert [t["turn"] for t in archive.turns(eid)] == [0, 1, 2]
    assert archive.evaluation(eid)["metrics"] == {"x": 1}


def test_readonly_open_of_a_missing_archive_says_so(tmp_path):
    with pytest.raises(ArchiveError, match="no archive"):
        Archive(tmp_path / "nope.db", readonly=True)
