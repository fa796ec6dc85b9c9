"""Jobs: the archive's state machine, argument validation before a row exists, detached workers (progress,
log, cancel of the whole process group, reaping dead workers), and the kinds end to end on the small default."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import coevo, copy_default
from engine import jobs
from engine.archive import Archive, ArchiveError
from engine.errors import InputError

SPEC = {"name": "h", "interface": {"name": "json"}}


def _wait(archive: Archive, job_id: int, timeout: float = 60, states=("done", "failed", "cancelled")) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = archive.job(job_id)
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {job['state']} after {timeout}s:\n{jobs.log_tail(job)}")


def _live_group(pgid: int) -> list[int]:
    """The processes of a process group that have not exited (zombies are exited)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


@pytest.fixture
def small_archive(tmp_path):
    """A harness, a base checkpoint with two fine-tuned children, a gold data set and task data; the model
    paths are not real (nothing here loads a model)."""
    from engine.tasks.smart_home import SmartHomeTask
    path = tmp_path / "archive.db"
    with Archive(path) as a:
        SmartHomeTask.generate(a.files_dir / "tasks" / "smart_home", seed=0, sizes={"train": 8, "dev": 8})
        h = a.add_harness(SPEC, creator="seed")
        base = a.add_checkpoint(name="base", path=tmp_path / "base", kind="base")
        d = a.add_dataset(path=tmp_path / "gold.jsonl", task="smart_home", source="gold", harness_id=h,
                          tasks_tried=8, samples=8, kept=8)
        for name in ("left", "right"):
            a.add_checkpoint(name=name, path=tmp_path / name, kind="sft", parents=[(base, "init")], harness_id=h,
                             dataset_id=d)
    return path


# -- the archive's jobs table ---------------------------------------------------------------------
def test_job_rows_move_from_queued_to_running_to_done(archive):
    v = archive.version()
    jid = archive.add_job("sleep", {"seconds": 1})
    assert archive.version() > v
    job = archive.job(jid)
    assert (job["state"], job["args"], job["result"], job["pid"]) == ("queued", {"seconds": 1}, None, None)
    assert not archive.job_progress(jid, 1, 2)  # only a running job reports progress
    archive.start_job(jid, 123, "/tmp/x.log")
    with pytest.raises(ArchiveError, match="cannot start job .*: it is running"):
        archive.start_job(jid, 124, "/tmp/y.log")
    assert archive.job_progress(jid, 1, 2, "half")
    assert archive.job_progress(jid, 2)  # total and message are kept
    job = archive.job(jid)
    assert (job["state"], job["pid"], job["progress"], job["total"], job["message"]) == ("running", 123, 2, 2, "half")
    archive.finish_job(jid, "done", result={"x": [1]})
    job = archive.job(jid)
    assert (job["state"], job["result"]) == ("done", {"x": [1]}) and job["finished_at"]
    with pytest.raises(ArchiveError, match="it is done"):
        archive.finish_job(jid, "failed", error="late")
    with pytest.raises(ArchiveError, match="it is done"):
        archive.cancel_job(jid)
    with pytest.raises(ArchiveError, match="done or failed"):
        archive.finish_job(archive.add_job("sleep", {}), "cancelled")
    with pytest.raises(ArchiveError, match="no job 99"):
        archive.start_job(99, 1, "x")


def test_a_cancelled_job_stays_cancelled(archive):
    jid = archive.add_job("sleep", {})
    archive.start_job(jid, 123, "/tmp/x.log")
    assert archive.cancel_job(jid)["state"] == "cancelled"
    with pytest.raises(ArchiveError, match="it is cancelled"):
        archive.finish_job(jid, "done", result={})
    assert not archive.job_progress(jid, 1, 1)
    assert archive.job(jid)["state"] == "cancelled"
    queued = archive.add_job("eval", {})
    archive.cancel_job(queued)
    with pytest.raises(ArchiveError, match="cannot start"):  # a worker that starts late does not run it
        archive.start_job(queued, 1, "x")
    assert [j["id"] for j in archive.jobs()] == [queued, jid]  # newest first
    assert [j["id"] for j in archive.jobs("cancelled", limit=1)] == [queued]
    assert archive.jobs("running") == []


# -- validation before a row exists ---------------------------------------------------------------
@pytest.mark.parametrize("kind, args, field", [
    ("nope", {}, "kind"),
    ("sleep", {"steps": "many"}, "steps"),
    ("sleep", {"stepz": 3}, "stepz"),
    ("eval", {"checkpoint": "left"}, "harness"),
    ("eval", {"harness": "nope", "checkpoint": "left"}, "harness"),
    ("eval", {"harness": "h", "checkpoint": "nope"}, "checkpoint"),
    ("eval", {"harness": "h", "checkpoint": "left", "split": "nope"}, "split"),
    ("eval", {"harness": "h", "checkpoint": "left", "task": "nope"}, "task"),
    ("eval", {"harness": "h", "checkpoint": "left", "limit": 0}, "limit"),
    ("sft", {"checkpoint": "left", "harness": "h", "dataset": "d9"}, "dataset"),
    ("sft", {"checkpoint": "left", "harness": "h", "dataset": "d1", "profile": "nope"}, "profile"),
    ("merge", {"models": ["left"]}, "models"),
    ("merge", {"models": ["left", "nope"]}, "models.1"),
    ("merge", {"models": ["left", "base"]}, "base"),  # base is left's ancestor
    ("merge", {"models": ["left", "right"], "density": 2}, "density"),
    ("round", {"mode": "sideways"}, "mode"),
    ("round", {"run_config": "/no/such.yaml"}, "run_config"),
])
def test_bad_kind_or_args_raise_naming_the_field_and_leave_no_row(small_archive, kind, args, field):
    with pytest.raises(InputError) as e:
        jobs.submit(small_archive, kind, args)
    assert e.value.field == field and f"[{field}]" in str(e.value)
    with Archive(small_archive) as a:
        assert a.jobs() == []


def test_args_are_stored_checked_with_defaults_and_ids(small_archive):
    with Archive(small_archive) as a:
        assert jobs.validate_args(a, "merge", {"models": ["left", "right"]}) == {
            "models": ["c2", "c3"], "base": "c1", "density": 0.5, "executor": None}  # the base: their common ancestor
        assert jobs.validate_args(a, "eval", {"harness": "h", "checkpoint": "left", "limit": 2}) == {
            "harness": "h1", "checkpoint": "c2", "task": "smart_home", "split": "dev", "limit": 2, "executor": None}
        with pytest.raises(InputError, match="executor"):
            jobs.validate_args(a, "eval", {"harness": "h", "checkpoint": "left", "executor": "slurm"})


def test_submitting_does_not_import_torch(small_archive):
    script = f"""
import sys, engine.jobs
from engine.archive import Archive
job = engine.jobs.submit({str(small_archive)!r}, "eval", {{"harness": "h", "checkpoint": "left", "limit": 1}})
engine.jobs.cancel({str(small_archive)!r}, job)
with Archive({str(small_archive)!r}) as a:
    engine.jobs.validate_args(a, "sft", {{"checkpoint": "left", "harness": "h", "dataset": "d1", "profile": "cpu"}})
    engine.jobs.validate_args(a, "merge", {{"models": ["left", "right"]}})
    engine.jobs.validate_args(a, "round", {{"rounds": 2}})
    engine.jobs.reap(a)
print([m for m in ("torch", "transformers", "swift", "mergekit") if m in sys.modules])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- workers --------------------------------------------------------------------------------------
def test_a_job_runs_in_a_detached_worker_reporting_progress(tmp_path):
    path = tmp_path / "archive.db"
    Archive(path).close()
    t0 = time.time()
    jid = jobs.submit(path, "sleep", {"seconds": 1.0, "steps": 4})
    assert time.time() - t0 < 1.0  # returns at once: the worker has not even started
    with Archive(path) as a:
        job = _wait(a, jid)
        assert job["state"] == "done", job["error"]
        assert (job["progress"], job["total"], job["result"]) == (4, 4, {"seconds": 1.0})
        assert job["pid"] != os.getpid() and job["started_at"] <= job["finished_at"]
        assert Path(job["log_path"]) == a.files_dir / "jobs" / f"{jid}.log"
        tail = jobs.log_tail(job)
        assert "step 4/4" in tail and tail.endswith('done {"seconds": 1.0}')
        assert jobs.log_tail(job, lines=1) == 'job 1: done {"seconds": 1.0}'
        deadline = time.time() + 10
        while jobs.worker_alive(job["pid"], jid) and time.time() < deadline:  # it reports, then exits
            time.sleep(0.05)
        assert not jobs.worker_alive(job["pid"], jid)  # exited, and reaped rather than left a zombie
        assert jobs.reap(a) == []


def test_cancel_stops_the_worker_and_its_children(tmp_path):
    path = tmp_path / "archive.db"
    Archive(path).close()
    jid = jobs.submit(path, "sleep", {"seconds": 60, "steps": 2})
    with Archive(path) as a:
        job = _wait(a, jid, states=("running",))
        pid = job["pid"]
        deadline = time.time() + 10
        while len(_live_group(pid)) < 2 and time.time() < deadline:  # the worker and its sleeping child
            time.sleep(0.05)
        assert len(_live_group(pid)) >= 2 and jobs.worker_alive(pid, jid)
        assert jobs.cancel(path, jid)["state"] == "cancelled"
        deadline = time.time() + 10
        while (jobs.worker_alive(pid, jid) or _live_group(pid)) and time.time() < deadline:
            time.sleep(0.05)
        assert _live_group(pid) == []
        job = a.job(jid)
        assert job["state"] == "cancelled" and job["error"] is None
        assert "cancelled" in jobs.log_tail(job)
        assert jobs.reap(a) == []
    with pytest.raises(ArchiveError, match="it is cancelled"):
        jobs.cancel(path, jid)


def test_a_failing_job_fails_with_its_error_and_traceback_in_the_log(tmp_path):
    path = tmp_path / "archive.db"
    Archive(path).close()
    jid = jobs.submit(path, "round", {})
    with Archive(path) as a:
        job = _wait(a, jid, timeout=120)
        assert job["state"] == "failed"
        assert "no harness 'smart_home-json'" in job["error"]
        assert "Traceback" in jobs.log_tail(job)


def test_reap_fails_running_jobs_whose_worker_is_gone(archive, monkeypatch):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; never waited for
    deadline = time.time() + 10
    while (Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
           and time.time() < deadline):
        time.sleep(0.05)
    ids = {}
    for name, pid in [("dead", dead.pid), ("zombie", zombie.pid), ("reused", os.getpid())]:
        ids[name] = archive.add_job("sleep", {})
        archive.start_job(ids[name], pid, "x.log")
    queued = archive.add_job("sleep", {})
    assert sorted(jobs.reap(archive)) == sorted(ids.values())
    for jid in ids.values():
        job = archive.job(jid)
        assert (job["state"], job["error"]) == ("failed", "worker exited without reporting")
    assert archive.job(queued)["state"] == "queued"  # its worker may still be starting
    monkeypatch.setattr("engine.jobs.runner.QUEUED_TIMEOUT_S", -1)
    assert jobs.reap(archive) == [queued]
    assert "never started" in archive.job(queued)["error"]
    zombie.wait()


def test_cli_starts_lists_shows_and_cancels_jobs(tmp_path):
    path = str(tmp_path / "archive.db")
    Archive(path).close()
    out = coevo("job", "start", "sleep", "--arg", "seconds=60", "--arg", "steps=30", "--archive", path).stdout
    assert "job 1 started" in out
    bad = coevo("job", "start", "sleep", "--arg", "steps=x", "--archive", path, check=False)
    assert bad.returncode == 2 and "[steps]" in bad.stderr
    with Archive(path) as a:
        _wait(a, 1, states=("running",))
        listed = coevo("job", "list", "--archive", path).stdout
        assert "sleep" in listed and "running" in listed
        assert "cancelled" in coevo("job", "cancel", "1", "--archive", path).stdout
        job = _wait(a, 1, states=("cancelled",))
        shown = coevo("job", "show", "1", "--archive", path).stdout
        assert 'sleep {"seconds": 60.0, "steps": 30}' in shown and "state cancelled" in shown
        deadline = time.time() + 10
        while _live_group(job["pid"]) and time.time() < deadline:
            time.sleep(0.05)
        assert _live_group(job["pid"]) == []


# -- the kinds on the small default (slow: shares the trained fixture) ----------------------------
@pytest.mark.slow
def test_eval_job_stores_an_evaluation(small_default, tmp_path):
    path = copy_default(small_default, tmp_path)
    jid = jobs.submit(path, "eval", {"harness": "smart_home-json", "checkpoint": "root-json", "limit": 4})
    with Archive(path) as a:
        job = _wait(a, jid, timeout=300)
        assert job["state"] == "done", job["error"]
        assert job["progress"] == job["total"] == 4 and job["message"] == "4/4 episodes"
        ev = a.evaluation(job["result"]["evaluation"])
        assert (ev["harness_id"], ev["checkpoint_id"], ev["episodes"]) == (a.harness("smart_home-json")["id"],
                                                                          a.checkpoint("root-json")["id"], 4)
        assert job["result"]["score"] == ev["score"] and job["result"]["timr"] == ev["timr"]


@pytest.mark.slow
def test_round_job_stops_at_the_gate_and_a_second_job_finishes_the_round(small_default, tmp_path):
    from engine.evolve.decisions import approve
    path = copy_default(small_default, tmp_path)
    run_config = str(small_default[0].parent / "run.yaml")
    args = {"mode": "harness-only", "run_config": run_config}  # no training: seconds
    first = jobs.submit(path, "round", {**args, "gate": "require"})
    with Archive(path) as a:
        job = _wait(a, first, timeout=300)
        assert job["state"] == "done", job["error"]
        (pending,) = a.decisions("proposed")
        assert job["result"] == {"waiting": pending["id"]}
        approve(a, pending["id"], by="ana")
        second = jobs.submit(path, "round", args)
        job = _wait(a, second, timeout=300)
        assert job["state"] == "done", job["error"]
        assert job["progress"] == job["total"] == 6 and job["message"].endswith("done")
        (summary,) = job["result"]["rounds"]
        assert a.rounds()[0]["state"] == "done" and summary["evaluation"] == a.evaluations()[-1]["id"]


@pytest.mark.slow
def test_merge_and_sft_jobs_register_checkpoints(small_default, tmp_path):
    import yaml
    path = copy_default(small_default, tmp_path)
    profile = yaml.safe_load((small_default[0].parent / "profile.yaml").read_text())
    profile.update(num_train_epochs=0.1)  # a few steps: the job's plumbing, not the model, is under test
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(profile))
    with Archive(path) as a:
        json_root, xml_root = a.checkpoint("root-json")["id"], a.checkpoint("root-xml")["id"]
        base = a.checkpoint("tiny-base")["id"]
        harness = a.harness("smart_home-json")["id"]
        dataset = a.checkpoint(json_root)["dataset_id"]
        merge = jobs.submit(path, "merge", {"models": [json_root, xml_root]})
        job = _wait(a, merge, timeout=300)
        assert job["state"] == "done", job["error"]
        merged = a.checkpoint(job["result"]["checkpoint"])
        assert merged["kind"] == "merge" and merged["recipe"]["base"] == base
        assert sorted((p["parent"], p["role"]) for p in merged["parents"]) == sorted(
            [(json_root, "model"), (xml_root, "model"), (base, "base")])
        assert (Path(merged["path"]) / "config.json").exists()
        sft = jobs.submit(path, "sft", {"checkpoint": merged["id"], "harness": harness, "dataset": dataset,
                                        "profile": str(tmp_path / "short.yaml")})
        job = _wait(a, sft, timeout=600)
        assert job["state"] == "done", job["error"]
        trained = a.checkpoint(job["result"]["checkpoint"])
        assert (trained["kind"], trained["harness_id"], trained["dataset_id"]) == ("sft", harness, dataset)
        assert trained["parents"] == [{"parent": merged["id"], "role": "init"}]
        assert trained["recipe"]["profile"]["num_train_epochs"] == 0.1
        assert (Path(trained["path"]) / "config.json").exists() and job["progress"] == job["total"] == 1
        assert json.loads((Path(trained["path"]) / "train_result.json").read_text())
