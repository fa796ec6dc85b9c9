"""Ablations from one start: each mode runs its rounds on its own copy of the initialised archive."""
from __future__ import annotations

import shutil
import sqlite3
from typing import Callable

from engine.archive import Archive
from engine.evolve.rounds import RoundRunner
from engine.run_config import MODES, RunConfig


def copy_archive(src: Archive, dst_path) -> Archive:
    """A consistent copy through SQLite's backup API (safe while others write)."""
    dst_path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        dst_path.with_name(dst_path.name + suffix).unlink(missing_ok=True)
    dst = sqlite3.connect(dst_path)
    src.conn.backup(dst)
    dst.close()
    copy = Archive(dst_path)
    # checkpoints are referenced by absolute path; the task data lives beside the archive: copy it
    shutil.copytree(src.files_dir / "tasks", copy.files_dir / "tasks", dirs_exist_ok=True)
    return copy


def mode_archive_path(archive: Archive, cfg: RunConfig, mode: str):
    """Where `ablate` keeps the archive of one mode (beside the start's archive)."""
    return archive.path.with_name(archive.path.stem + f".ablate-seed{cfg.seed}") / f"{mode}.db"


def ablate(archive: Archive, cfg: RunConfig, rounds: int, log: Callable[[str], None] = print) -> dict[str, list[dict]]:
    already = [r["id"] for r in archive.rounds() if r["state"] == "done"]  # the common start may have rounds
    table = {}
    for mode in MODES:
        path = mode_archive_path(archive, cfg, mode)
        if path.exists():
            run_archive = Archive(path)  # resume that mode where it stopped
        else:
            run_archive = copy_archive(archive, path)
        log(f"== {mode} ({path})")
        with run_archive:
            runner = RoundRunner(run_archive, cfg.model_copy(update={"mode": mode, "gate": "auto"}), log=log)
            summary = runner.run(len(already) + rounds)
            table[mode] = [r for r in summary if r["round"] not in already]
    return table


def format_table(table: dict[str, list[dict]]) -> str:
    rounds = max((len(v) for v in table.values()), default=0)
    head = f"{'round':<7}" + "".join(f"{m:>24}" for m in table)
    lines = [head, f"{'':<7}" + "".join(f"{'score / TIMR':>24}" for _ in table)]
    for i in range(rounds):
        row = f"{i + 1:<7}"
        for m in table:
            r = table[m][i] if i < len(table[m]) else None
            cell = f"{r['score']:.3f} / {r['timr']:.1%}" if r else "-"
            row += f"{cell:>24}"
        lines.append(row)
    return "\n".join(lines)
