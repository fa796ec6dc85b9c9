"""The archive: one SQLite file holding harnesses, checkpoints, data sets, evaluations, turns,
rounds, decisions and jobs. All SQL of the project lives in this package. This module is longer than
400 lines on purpose: every query sits next to the others, so that a schema change is one file's edit.

Every write is one transaction (BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout
instead of failing on a lock upgrade) and bumps the `version` counter that readers use as a cache key.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import operator
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

import sqlite_utils

from engine.archive.schema import MIGRATIONS, SCHEMA_VERSION
from engine.errors import CoevoError

DEFAULT_PATH = "archive.db"
BUSY_TIMEOUT_MS = 30_000


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def spec_hash(spec_json: str) -> str:
    return hashlib.sha256(spec_json.encode()).hexdigest()[:16]


class ArchiveError(CoevoError):
    pass


PROBE = ":probe"


def probe_split(split: str) -> str:
    """The split name of an inheritance probe on `split`: a few items, never a full score."""
    return split + PROBE


def is_probe(split: str) -> bool:
    return split.endswith(PROBE)


def _job_row(row: dict) -> dict:
    return dict(row, args=json.loads(row["args"]),
                result=json.loads(row["result"]) if row["result"] is not None else None)


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def insert_rows(conn: sqlite3.Connection, table: str, rows: Iterable[dict]) -> int:
    """Insert many rows of one table with one prepared statement, inside the caller's transaction. The
    columns are the schema's: a key the table does not have is an error naming it. Returns the count."""
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return 0
    known = table_columns(conn, table)
    if not known:
        raise ArchiveError(f"no table {table!r} in the archive")
    unknown = sorted(set(first) - set(known))
    if unknown:
        raise ArchiveError(f"table {table} has no column {', '.join(unknown)} (its columns: {', '.join(known)})")
    cols = [c for c in known if c in first]
    values = operator.itemgetter(*cols) if len(cols) > 1 else (lambda r: (r[cols[0]],))
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    return conn.executemany(sql, map(values, itertools.chain([first], rows))).rowcount


class Archive:
    def __init__(self, path=DEFAULT_PATH, *, readonly: bool = False):
        self.path = Path(path).resolve()  # checkpoints and workers need absolute paths
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                raise ArchiveError(f"{self.path}: no archive here (run `coevo init` first)")
            conn = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        self.db = sqlite_utils.Database(conn)
        self.conn = conn
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        elif self.schema_version() != SCHEMA_VERSION:
            raise ArchiveError(f"{self.path}: schema version {self.schema_version()}, expected {SCHEMA_VERSION}")

    # -- plumbing ---------------------------------------------------------------------------------
    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def files_dir(self) -> Path:
        """Where checkpoints, data sets and task files of this archive live."""
        return self.path.with_name(self.path.stem + ".d")

    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise ArchiveError(f"{self.path}: schema version {current} is newer than this code ({SCHEMA_VERSION})")
        if current == SCHEMA_VERSION:
            return
        # a migration may rebuild a table others reference: SQLite's procedure turns the checks off for it
        # and verifies every reference before turning them on again
        self.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            for version in range(current, SCHEMA_VERSION):
                # executescript commits first; the migration and its version bump are then one transaction
                self.conn.executescript(
                    f"BEGIN IMMEDIATE;\n{MIGRATIONS[version]}\nPRAGMA user_version = {version + 1};\nCOMMIT;"
                )
            broken = self.conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise ArchiveError(f"{self.path}: migration left broken references: {[tuple(r) for r in broken[:5]]}")
        finally:
            self.conn.execute("PRAGMA foreign_keys = ON")

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction; nested uses become savepoints. Bumps the version counter."""
        if self.readonly:
            raise ArchiveError(f"{self.path}: opened read-only")
        if self.conn.in_transaction:
            with self.db.atomic():
                yield self.db
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            self.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def version(self) -> int:
        return self.conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]

    def query(self, sql: str, params: Iterable = ()) -> list[dict]:
        return [dict(r) for r in self.conn.execute(sql, tuple(params))]

    def _next_id(self, table: str, prefix: str) -> str:
        n = self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        return f"{prefix}{n + 1}"

    # -- harnesses --------------------------------------------------------------------------------
    def add_harness(self, spec: dict, *, creator: str, rationale: str = "", parents: list[str] = (),
                    round: int | None = None) -> str:
        """Store a harness spec; the same spec (by content) is the same harness and returns its id."""
        spec_json = json.dumps(spec, sort_keys=True)
        digest = spec_hash(spec_json)
        with self.transaction() as db:
            row = self.conn.execute("SELECT id FROM harnesses WHERE spec_hash = ?", (digest,)).fetchone()
            if row:
                return row["id"]
            hid = self._next_id("harnesses", "h")
            db["harnesses"].insert(dict(
                id=hid, name=spec.get("name", hid), spec=spec_json, spec_hash=digest,
                interface=spec["interface"]["name"], creator=creator, rationale=rationale,
                round=round, created_at=now()))
            for pos, parent in enumerate(parents):
                self._require("harnesses", parent)
                db["harness_parents"].insert(dict(child=hid, parent=parent, position=pos))
            return hid

    def harness(self, ref: str) -> dict:
        """A harness by id or by name (the newest of that name)."""
        row = self.conn.execute(
            "SELECT * FROM harnesses WHERE id = ? OR name = ? ORDER BY id = ? DESC, created_at DESC LIMIT 1",
            (ref, ref, ref)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: no harness {ref!r}")
        out = dict(row)
        out["spec"] = json.loads(out["spec"])
        out["parents"] = [r["parent"] for r in self.conn.execute(
            "SELECT parent FROM harness_parents WHERE child = ? ORDER BY position", (out["id"],))]
        return out

    def harnesses(self, task: str | None = None) -> list[dict]:
        """Every harness, or those of one task."""
        where, params = ("WHERE json_extract(spec, '$.task') = ? ", (task,)) if task else ("", ())
        return self.query("SELECT id, name, interface, creator, rationale, round, created_at FROM harnesses "
                          f"{where}ORDER BY rowid", params)

    # -- data sets --------------------------------------------------------------------------------
    def add_dataset(self, *, path, task: str, source: str, tasks_tried: int, samples: int, kept: int,
                    harness_id: str | None = None, checkpoint_id: str | None = None,
                    meta: dict | None = None) -> str:
        with self.transaction() as db:
            did = self._next_id("datasets", "d")
            db["datasets"].insert(dict(
                id=did, path=str(path), task=task, harness_id=harness_id, checkpoint_id=checkpoint_id,
                source=source, tasks_tried=tasks_tried, samples=samples, kept=kept,
                acceptance_rate=(kept / samples) if samples else None, meta=json.dumps(meta or {}),
                created_at=now()))
            return did

    def find_dataset(self, path) -> str | None:
        row = self.conn.execute("SELECT id FROM datasets WHERE path = ?", (str(path),)).fetchone()
        return row["id"] if row else None

    def dataset(self, did: str) -> dict:
        return self._get("datasets", did)

    # -- checkpoints ------------------------------------------------------------------------------
    def add_checkpoint(self, *, name: str, path, kind: str, parents: list[tuple[str, str]] = (),
                       harness_id: str | None = None, dataset_id: str | None = None,
                       recipe: dict | None = None, round: int | None = None) -> str:
        """Register a complete checkpoint directory; `parents` are (checkpoint id, role) pairs."""
        with self.transaction() as db:
            cid = self._next_id("checkpoints", "c")
            db["checkpoints"].insert(dict(
                id=cid, name=name, path=str(path), kind=kind, harness_id=harness_id, dataset_id=dataset_id,
                recipe=json.dumps(recipe or {}), round=round, created_at=now()))
            for parent, role in parents:
                self._require("checkpoints", parent)
                db["checkpoint_parents"].insert(dict(child=cid, parent=parent, role=role))
            return cid

    def checkpoint(self, ref: str) -> dict:
        row = self.conn.execute(
            "SELECT * FROM checkpoints WHERE id = ? OR name = ? ORDER BY id = ? DESC, created_at DESC LIMIT 1",
            (ref, ref, ref)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: no checkpoint {ref!r}")
        out = dict(row)
        out["recipe"] = json.loads(out["recipe"])
        out["parents"] = self.query("SELECT parent, role FROM checkpoint_parents WHERE child = ?", (out["id"],))
        return out

    def checkpoints(self) -> list[dict]:
        return self.query("SELECT id, name, path, kind, harness_id, dataset_id, round, created_at FROM checkpoints "
                          "ORDER BY rowid")

    # -- evaluations ------------------------------------------------------------------------------
    def add_evaluation(self, evaluation: dict, episodes: list[dict], turns: list[dict]) -> int:
        """Store an evaluation with all its episodes and turns in one transaction: all or nothing."""
        with self.transaction() as db:
            self._require("harnesses", evaluation["harness_id"])
            self._require("checkpoints", evaluation["checkpoint_id"])
            row = dict(evaluation, metrics=json.dumps(evaluation.get("metrics", {})),
                       config=json.dumps(evaluation.get("config", {})),
                       mismatch_kinds=json.dumps(evaluation.get("mismatch_kinds", {})), created_at=now())
            eid = db["evaluations"].insert(row).last_pk
            insert_rows(self.conn, "episodes", (dict(e, evaluation_id=eid) for e in episodes))
            insert_rows(self.conn, "turns", (dict(t, evaluation_id=eid) for t in turns))
            return eid

    def evaluation(self, eid: int) -> dict:
        out = self._get("evaluations", eid)
        out["metrics"] = json.loads(out["metrics"])
        out["config"] = json.loads(out["config"])
        out["mismatch_kinds"] = json.loads(out["mismatch_kinds"])
        return out

    def evaluations(self) -> list[dict]:
        return self.query(
            "SELECT e.id, e.harness_id AS harness, e.checkpoint_id AS checkpoint, e.task, e.split, e.score, "
            "e.timr, e.turns, e.mismatched_turns, e.episodes, e.tokens, e.seconds, e.round, e.created_at "
            "FROM evaluations e ORDER BY e.id")

    def find_evaluation(self, harness_id: str, checkpoint_id: str, task: str, split: str,
                        episodes: int | None = None) -> dict | None:
        """The newest evaluation of a pair on a task split (with that many episodes), or None."""
        rows = self.query(
            "SELECT id, score, timr, episodes FROM evaluations WHERE harness_id = ? AND checkpoint_id = ? AND "
            "task = ? AND split = ? AND (? IS NULL OR episodes = ?) ORDER BY id DESC LIMIT 1",
            (harness_id, checkpoint_id, task, split, episodes, episodes))
        return rows[0] if rows else None

    def matrix(self, task: str, split: str) -> list[dict]:
        """The newest evaluation of every (harness, checkpoint) pair for one task and split."""
        return self.query(
            "SELECT harness_id AS harness, checkpoint_id AS checkpoint, MAX(id) AS id, score, timr "
            "FROM evaluations WHERE task = ? AND split = ? GROUP BY harness_id, checkpoint_id",
            (task, split))

    def episodes(self, eid: int) -> list[dict]:
        return self.query("SELECT * FROM episodes WHERE evaluation_id = ? ORDER BY idx", (eid,))

    def turns(self, eid: int, episode: int | None = None) -> list[dict]:
        if episode is None:
            return self.query("SELECT * FROM turns WHERE evaluation_id = ? ORDER BY episode, turn", (eid,))
        return self.query("SELECT * FROM turns WHERE evaluation_id = ? AND episode = ? ORDER BY turn",
                          (eid, episode))

    def children_counts(self) -> dict[str, int]:
        return {r["parent"]: r["n"] for r in self.query(
            "SELECT parent, COUNT(*) AS n FROM harness_parents GROUP BY parent")}

    def best_scores(self, task: str, split: str) -> dict[str, dict]:
        """Per harness, its best evaluation on a task split (score first, then lower TIMR), with the counts
        of its mismatch kinds."""
        out: dict[str, dict] = {}
        for r in self.query("SELECT id, harness_id, checkpoint_id, score, timr, mismatch_kinds FROM evaluations "
                            "WHERE task = ? AND split = ? ORDER BY score DESC, timr ASC, id ASC", (task, split)):
            if r["harness_id"] not in out:
                out[r["harness_id"]] = {**r, "mismatch_kinds": json.loads(r["mismatch_kinds"] or "{}")}
        return out

    def failures(self, harness_id: str, limit: int = 5) -> list[dict]:
        """Recent failed turns under a harness: mismatches first, then wrong answers."""
        return self.query(
            "SELECT t.output, t.parse_error, t.feedback FROM turns t JOIN evaluations e ON e.id = t.evaluation_id "
            "WHERE e.harness_id = ? AND (t.mismatch = 1 OR t.reward = 0) "
            "ORDER BY t.mismatch DESC, t.evaluation_id DESC LIMIT ?", (harness_id, limit))

    def checkpoint_tasks(self) -> dict[str, str | None]:
        """The task each checkpoint belongs to: its training data's, its base recipe's, or its parents'
        (a merge). None for a model registered from outside."""
        parents: dict[str, list[str]] = {}
        for r in self.query("SELECT child, parent FROM checkpoint_parents ORDER BY role"):
            parents.setdefault(r["child"], []).append(r["parent"])
        out: dict[str, str | None] = {}
        for r in self.query("SELECT c.id, d.task AS data_task, json_extract(c.recipe, '$.task') AS recipe_task "
                            "FROM checkpoints c LEFT JOIN datasets d ON d.id = c.dataset_id ORDER BY c.rowid"):
            inherited = next((out[p] for p in parents.get(r["id"], []) if out.get(p)), None)  # parents come first
            out[r["id"]] = r["data_task"] or r["recipe_task"] or inherited
        return out

    def find_checkpoint(self, name: str) -> str | None:
        row = self.conn.execute("SELECT id FROM checkpoints WHERE name = ?", (name,)).fetchone()
        return row["id"] if row else None

    def successes(self, harness_id: str, limit: int = 50) -> list[dict]:
        """Successful, mismatch-free episodes under a harness: their input and final action."""
        return self.query(
            "SELECT ep.input, t.action FROM episodes ep JOIN evaluations e ON e.id = ep.evaluation_id "
            "JOIN turns t ON t.evaluation_id = ep.evaluation_id AND t.episode = ep.idx "
            "AND t.turn = ep.turns - 1 WHERE e.harness_id = ? AND ep.success = 1 AND ep.mismatched_turns = 0 "
            "AND ep.input != '' ORDER BY ep.evaluation_id DESC, ep.idx LIMIT ?", (harness_id, limit))

    # -- rounds and their steps -------------------------------------------------------------------
    def open_round(self, mode: str, config: dict) -> dict:
        """The unfinished round of this archive, or a new one."""
        row = self.conn.execute("SELECT * FROM rounds WHERE state != 'done' ORDER BY id LIMIT 1").fetchone()
        if row:
            return dict(row)
        with self.transaction() as db:
            rid = db["rounds"].insert(dict(mode=mode, state="running", config=json.dumps(config),
                                           created_at=now())).last_pk
        return dict(self.conn.execute("SELECT * FROM rounds WHERE id = ?", (rid,)).fetchone())

    def rounds(self) -> list[dict]:
        return self.query("SELECT * FROM rounds ORDER BY id")

    def step_result(self, round_id: int, step: str) -> dict | None:
        row = self.conn.execute("SELECT result FROM round_steps WHERE round_id = ? AND step = ? AND state = 'done'",
                                (round_id, step)).fetchone()
        return json.loads(row["result"]) if row else None

    def finish_step(self, round_id: int, step: str, result: dict) -> None:
        """Mark a step done; call inside the transaction that writes the step's rows."""
        with self.transaction() as db:
            db["round_steps"].upsert(dict(round_id=round_id, step=step, state="done", result=json.dumps(result),
                                          finished_at=now()), pk=("round_id", "step"))

    def finish_round(self, round_id: int) -> None:
        with self.transaction():
            self.conn.execute("UPDATE rounds SET state = 'done', finished_at = ? WHERE id = ?", (now(), round_id))

    def round_steps(self, round_id: int) -> list[dict]:
        return self.query("SELECT * FROM round_steps WHERE round_id = ?", (round_id,))

    # -- decisions --------------------------------------------------------------------------------
    def add_decision(self, *, round_id: int | None, step: str | None, kind: str, candidates: list, evidence: dict,
                     choice: str | None, rationale: str, status: str, decided_by: str | None = None,
                     comment: str | None = None) -> int:
        with self.transaction() as db:
            return db["decisions"].insert(dict(
                round_id=round_id, step=step, kind=kind, candidates=json.dumps(candidates),
                evidence=json.dumps(evidence), choice=choice, rationale=rationale, status=status,
                decided_by=decided_by, comment=comment, created_at=now(),
                decided_at=now() if status != "proposed" else None)).last_pk

    def decision(self, did: int) -> dict:
        out = self._get("decisions", did)
        out["candidates"] = json.loads(out["candidates"])
        out["evidence"] = json.loads(out["evidence"])
        return out

    def step_decision(self, round_id: int, step: str) -> dict | None:
        row = self.conn.execute("SELECT id FROM decisions WHERE round_id = ? AND step = ? ORDER BY id LIMIT 1",
                                (round_id, step)).fetchone()
        return self.decision(row["id"]) if row else None

    def steering(self, kinds: tuple[str, ...], *, unapplied: bool = False) -> list[dict]:
        """A person's steering acts of these kinds, oldest first; `unapplied`: not yet taken by a round."""
        marks = ", ".join("?" * len(kinds))
        rows = self.query(f"SELECT id FROM decisions WHERE status = 'steer' AND kind IN ({marks})"
                          + (" AND round_id IS NULL" if unapplied else "") + " ORDER BY id", kinds)
        return [self.decision(r["id"]) for r in rows]

    def apply_steering(self, did: int, round_id: int) -> None:
        """Mark a steering act as taken by a round; call inside the transaction of the step it steers."""
        with self.transaction():
            cur = self.conn.execute("UPDATE decisions SET round_id = ? WHERE id = ? AND status = 'steer' "
                                    "AND round_id IS NULL", (round_id, did))
            if cur.rowcount != 1:
                raise ArchiveError(f"{self.path}: steering act {did} is applied already")

    def decisions(self, status: str | None = None) -> list[dict]:
        if status:
            return self.query("SELECT * FROM decisions WHERE status = ? ORDER BY id", (status,))
        return self.query("SELECT * FROM decisions ORDER BY id")

    def settle_decision(self, did: int, *, status: str, choice: str | None, decided_by: str,
                        comment: str | None) -> None:
        with self.transaction():
            cur = self.conn.execute(
                "UPDATE decisions SET status = ?, choice = COALESCE(?, choice), decided_by = ?, comment = ?, "
                "decided_at = ? WHERE id = ? AND status = 'proposed'", (status, choice, decided_by, comment, now(), did))
            if cur.rowcount != 1:
                raise ArchiveError(f"{self.path}: decision {did} is not pending")

    # -- jobs -------------------------------------------------------------------------------------
    def add_job(self, kind: str, args: dict) -> int:
        with self.transaction() as db:
            return db["jobs"].insert(dict(kind=kind, args=json.dumps(args), state="queued",
                                          created_at=now())).last_pk

    def job(self, jid: int) -> dict:
        return _job_row(self._get("jobs", jid))

    def jobs(self, state: str | None = None, limit: int | None = None) -> list[dict]:
        """Jobs, newest first."""
        sql, params = "SELECT * FROM jobs", []
        if state:
            sql, params = sql + " WHERE state = ?", [state]
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql, params = sql + " LIMIT ?", params + [limit]
        return [_job_row(r) for r in self.query(sql, params)]

    def start_job(self, jid: int, pid: int, log_path) -> None:
        self._move_job(jid, ("queued",), "start", state="running", pid=pid, log_path=str(log_path),
                       started_at=now())

    def job_progress(self, jid: int, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Record progress of a running job; False (and nothing written) once it is no longer running."""
        with self.transaction():
            cur = self.conn.execute(
                "UPDATE jobs SET progress = ?, total = COALESCE(?, total), message = COALESCE(?, message) "
                "WHERE id = ? AND state = 'running'", (progress, total, message, jid))
            return cur.rowcount == 1

    def finish_job(self, jid: int, state: str, result: dict | None = None, error: str | None = None) -> None:
        if state not in ("done", "failed"):
            raise ArchiveError(f"{self.path}: a job finishes as done or failed, not {state!r}")
        # a cancelled job stays cancelled: the worker may report after the person cancelled it
        self._move_job(jid, ("queued", "running"), f"finish ({state})", state=state, error=error,
                       result=json.dumps(result) if result is not None else None, finished_at=now())

    def cancel_job(self, jid: int) -> dict:
        self._move_job(jid, ("queued", "running"), "cancel", state="cancelled", finished_at=now())
        return self.job(jid)

    def _move_job(self, jid: int, from_states: tuple[str, ...], action: str, **values) -> None:
        """One state transition, allowed only from `from_states`."""
        with self.transaction():
            sets = ", ".join(f"{k} = ?" for k in values)
            marks = ", ".join("?" * len(from_states))
            cur = self.conn.execute(f"UPDATE jobs SET {sets} WHERE id = ? AND state IN ({marks})",
                                    (*values.values(), jid, *from_states))
            if cur.rowcount != 1:
                state = self._get("jobs", jid)["state"]
                raise ArchiveError(f"{self.path}: cannot {action} job {jid}: it is {state}")

    # -- lineage ----------------------------------------------------------------------------------
    def harness_lineage(self):
        from engine.archive.lineage import harness_dag
        return harness_dag(self)

    def checkpoint_lineage(self):
        from engine.archive.lineage import checkpoint_dag
        return checkpoint_dag(self)

    # -- summary ----------------------------------------------------------------------------------
    def summary(self) -> dict:
        return {
            "archive": str(self.path),
            "schema_version": self.schema_version(),
            "version": self.version(),
            "harnesses": self.harnesses(),
            "checkpoints": self.checkpoints(),
            "evaluations": self.evaluations(),
        }

    # -- helpers ----------------------------------------------------------------------------------
    def _get(self, table: str, key) -> dict:
        row = self.conn.execute(f"SELECT * FROM {table} WHERE id = ?", (key,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: no {table[:-1]} {key!r}")
        return dict(row)

    def _require(self, table: str, key) -> None:
        self._get(table, key)
