"""One job in its own process: `python -m engine.jobs.worker --archive PATH --job ID`.

`engine.jobs.submit` starts it in a new session (its own process group), its output going to the job's
log. It marks the job running, runs the kind, and leaves the row done or failed; on SIGTERM (a cancel) it
leaves the row cancelled and takes its children (an ms-swift run) down with it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback

from engine.archive import Archive, ArchiveError
from engine.errors import CoevoError
from engine.jobs.kinds import JOB_KINDS
from engine.jobs.runner import job_log_path


class JobCancelled(BaseException):
    """Raised in the worker by SIGTERM; a BaseException so that no `except Exception` in a kind swallows it."""


def _on_sigterm(signum, frame):
    raise JobCancelled()


class Reporter:
    """The progress callback: writes at most one row update per `interval` seconds, and always the last
    one (done == total); `flush` writes what is pending."""

    def __init__(self, archive: Archive, job_id: int, interval: float = 0.5):
        self.archive, self.job_id, self.interval = archive, job_id, interval
        self.pending: tuple | None = None
        self.last = 0.0

    def __call__(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self.pending = (done, total, message)
        if (total is not None and done >= total) or time.monotonic() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.pending is None:
            return
        done, total, message = self.pending
        self.pending, self.last = None, time.monotonic()
        if not self.archive.job_progress(self.job_id, done, total, message):
            raise JobCancelled()  # cancelled, but the signal did not reach us (e.g. the pid was not yet known)


def _finish(archive: Archive, job_id: int, state: str, **kw) -> None:
    try:
        archive.finish_job(job_id, state, **kw)
    except ArchiveError as e:  # cancelled while finishing: the person's cancel stands
        print(e, flush=True)


def run(archive: Archive, job_id: int) -> int:
    """Run one queued job to its end; the exit status."""
    try:
        archive.start_job(job_id, os.getpid(), job_log_path(archive, job_id))
    except ArchiveError as e:  # cancelled before it started
        print(e, flush=True)
        return 0
    try:
        job = archive.job(job_id)
        print(f"job {job_id}: {job['kind']} {json.dumps(job['args'])} (pid {os.getpid()})", flush=True)
        report = Reporter(archive, job_id)
        try:
            result = JOB_KINDS.get(job["kind"])(archive, job["args"], report)
            report.flush()
        except Exception as e:
            traceback.print_exc()  # to the job's log
            error = str(e) if isinstance(e, CoevoError) else f"{type(e).__name__}: {e}"
            _finish(archive, job_id, "failed", error=error)
            return 1
        _finish(archive, job_id, "done", result=result)
        print(f"job {job_id}: done {json.dumps(result)}", flush=True)
        return 0
    except JobCancelled:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"job {job_id}: cancelled", flush=True)
        try:
            archive.cancel_job(job_id)  # a SIGTERM that did not come from `cancel` (shutdown, kill)
        except ArchiveError:
            pass
        if os.getpgrp() == os.getpid():  # our own group (as submit starts us): the children go too
            os.killpg(os.getpgrp(), signal.SIGTERM)
        return 143


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.jobs.worker", description="Run one job of an archive.")
    p.add_argument("--archive", required=True)
    p.add_argument("--job", type=int, required=True)
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    with Archive(args.archive) as archive:
        return run(archive, args.job)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # a cancelled job does not wait for threads the interrupted libraries left behind
    if code == 143:
        os._exit(code)
    sys.exit(code)
