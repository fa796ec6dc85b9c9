"""Starting, cancelling and watching job workers from another process (the dashboard, the CLI).

Nothing here waits for a job or imports the ML stack: `submit` returns as soon as the worker is spawned.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from engine.archive import Archive, ArchiveError
from engine.errors import CoevoError
from engine.jobs.kinds import validate_args

QUEUED_TIMEOUT_S = 120  # a worker marks its job running within seconds of its start

# the workers this process started: poll() reaps an exited one, which would otherwise stay a zombie
# (and look alive) until this long-lived process waits for it
_children: dict[int, subprocess.Popen] = {}


def job_log_path(archive: Archive, job_id: int) -> Path:
    return archive.files_dir / "jobs" / f"{job_id}.log"


@contextmanager
def _writable(archive) -> Iterator[Archive]:
    """The given Archive, or a writable connection of our own (the dashboard reads through a read-only one)."""
    if isinstance(archive, Archive) and not archive.readonly:
        yield archive
        return
    path = Path(archive.path if isinstance(archive, Archive) else archive)
    if not path.exists():
        raise ArchiveError(f"{path.resolve()}: no archive here (run `coevo init` first)")
    with Archive(path) as own:
        yield own


@contextmanager
def _readable(archive) -> Iterator[Archive]:
    """The given Archive, or a read-only connection of our own."""
    if isinstance(archive, Archive):
        yield archive
        return
    with Archive(archive, readonly=True) as own:
        yield own


def submit(archive_path, kind: str, args: dict | None = None) -> int:
    """Validate the arguments (InputError naming the field, and no job row, if they are bad), record the
    job and start its worker in a new session; returns the job id at once."""
    with _writable(archive_path) as archive:
        clean = validate_args(archive, kind, args or {})
        job_id = archive.add_job(kind, clean)
        log = job_log_path(archive, job_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "engine.jobs.worker", "--archive", str(archive.path), "--job", str(job_id)]
        try:
            with open(log, "ab") as out:
                # a new session: closing the dashboard or its terminal does not stop the job, and the
                # job's process group (the worker and its children) can be signalled as one
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        except OSError as e:
            archive.finish_job(job_id, "failed", error=f"could not start the worker: {e}")
            raise CoevoError(f"job {job_id}: could not start the worker: {e}") from e
    _children[proc.pid] = proc
    return job_id


def worker_alive(pid: int | None, job_id: int) -> bool:
    """Whether `pid` is still job `job_id`'s worker: not exited, not a zombie, and not a reused pid."""
    if not pid:
        return False
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: /proc tells whose
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():
        return True  # no /proc (macOS): signal 0 is all we know
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False  # it exited meanwhile
    if state in ("Z", "X"):  # exited; its parent has not waited for it yet
        return False
    is_worker = b"engine.jobs.worker" in argv
    return is_worker and any(argv[i:i + 2] == [b"--job", str(job_id).encode()] for i in range(len(argv)))


def cancel(archive_path, job_id: int) -> dict:
    """Cancel a queued or running job; returns its row. The row is settled first, so the worker's last
    report cannot undo it; then SIGTERM goes to the worker's process group, which takes its children
    (an ms-swift run, torchrun ranks) down with it."""
    with _writable(archive_path) as archive:
        job = archive.cancel_job(job_id)
    pid = job["pid"]
    if worker_alive(pid, job_id):
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGTERM)
            else:  # started by hand, not by submit: its group is not its own
                os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # it ended meanwhile
    return job


def reap(archive) -> list[int]:
    """Mark as failed the jobs whose worker is gone without reporting (killed, out of memory, a crash at
    start); returns their ids. The dashboard calls this as it lists jobs."""
    with _readable(archive) as a:  # the usual case, polled every second: nothing to write
        now = datetime.now(timezone.utc)
        gone = [(job["id"], "worker exited without reporting") for job in a.jobs("running")
                if not worker_alive(job["pid"], job["id"])]
        gone += [(job["id"], "worker never started (see the job's log)") for job in a.jobs("queued")
                 if (now - datetime.fromisoformat(job["created_at"])).total_seconds() > QUEUED_TIMEOUT_S]
    if not gone:
        return []
    reaped = []
    with _writable(archive) as a:
        for job_id, error in gone:
            reaped += _fail(a, job_id, error)
    return reaped


def _fail(archive: Archive, job_id: int, error: str) -> list[int]:
    try:
        archive.finish_job(job_id, "failed", error=error)
    except ArchiveError:  # it finished or was cancelled meanwhile
        return []
    return [job_id]


def log_tail(job: dict, lines: int = 40) -> str:
    """The last lines of a job's log ('' before its worker has started)."""
    path = job.get("log_path")
    if not path or not Path(path).is_file():
        return ""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - lines * 4096))  # a tail does not read a whole multi-megabyte training log
        text = f.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])
