"""Every read of the archive the dashboard makes, cached on the archive's version counter.

A commit in WAL mode does not change the file's mtime, so the cache key is the counter every writer
bumps, read uncached on each script run (a fraction of a millisecond). Each read opens its own
read-only connection: script runs happen on different threads."""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from engine import views
from engine.archive import Archive
from engine.archive.store import ArchiveError


def archive_path() -> str:
    return str(Path(os.environ.get("COEVO_ARCHIVE", "archive.db")).resolve())


def version() -> int:
    with Archive(archive_path(), readonly=True) as a:
        return a.version()


@st.cache_data(show_spinner=False, max_entries=256)
def _view(name: str, path: str, version: int, *args):
    with Archive(path, readonly=True) as a:
        return getattr(views, name)(a, *args)


def view(name: str, *args):
    """engine.views.<name>(archive, *args), cached until the archive changes."""
    return _view(name, archive_path(), version(), *args)


def require_archive() -> None:
    """Stop the page with a clear message when there is no readable archive."""
    try:
        version()
    except (ArchiveError, OSError) as e:
        st.error(f"Cannot read the archive: {e}")
        st.info("Make one with `coevo run`, or start the dashboard with `coevo dashboard --archive PATH`.")
        st.stop()


def writable() -> Archive:
    """A writable archive, for a person's decisions; close it after use."""
    return Archive(archive_path())


def task_splits() -> list[dict]:
    return view("task_splits")


def overview() -> dict:
    return view("overview")


def lineage(task: str | None, split: str | None) -> dict:
    return view("lineage", task, split)


def harness_detail(hid: str) -> dict:
    return view("harness_detail", hid)


def checkpoint_detail(cid: str) -> dict:
    return view("checkpoint_detail", cid)


def matrix(task: str, split: str) -> dict:
    return view("matrix", task, split)


def co_lineage(task: str, split: str) -> dict:
    return view("co_lineage", task, split)


def live() -> dict | None:
    return view("live")


def tasks() -> list[str]:
    """The tasks the archive holds harnesses of."""
    return view("tasks")


def steering(task: str | None) -> dict:
    """What steers the next round (read uncached: a person acts on it)."""
    from engine.evolve.steering import state
    with Archive(archive_path(), readonly=True) as a:
        return state(a, task)


def report_html() -> str:
    from engine.report import build_report
    with Archive(archive_path(), readonly=True) as a:
        return build_report(a)


def newest_evaluation() -> int | None:
    return view("newest_evaluation")


def evaluation(eid: int) -> dict:
    return view("evaluation", eid)


def evaluations_of(task: str, split: str, harness: str | None = None, checkpoint: str | None = None) -> list[dict]:
    return view("evaluations_of", task, split, harness, checkpoint)


def episodes(eid: int, success: bool | None, mismatch: bool | None) -> list[dict]:
    return view("episodes", eid, success, mismatch)


def episode(eid: int, idx: int) -> dict:
    return view("episode", eid, idx)


def decisions() -> dict:
    return view("decisions")


def compare(kind: str, left: str, right: str) -> dict:
    return view("compare", kind, left, right)


def datasets() -> list[dict]:
    return view("datasets")


def ids(kind: str) -> list[dict]:
    return view("ids", kind)


def jobs(limit: int = 200) -> list[dict]:
    """Jobs, newest first, read uncached (the Jobs page polls them every second); a job whose worker
    died without reporting is marked failed first."""
    from engine.jobs import reap
    reap(archive_path())
    with Archive(archive_path(), readonly=True) as a:
        return a.jobs(limit=limit)
