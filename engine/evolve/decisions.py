"""A person settles a pending decision: approve the proposed choice or override it with another
candidate. The CLI and the dashboard call these same functions."""
from __future__ import annotations

from engine.archive import Archive
from engine.errors import CoevoError


def approve(archive: Archive, decision_id: int, *, by: str, comment: str | None = None) -> dict:
    archive.settle_decision(decision_id, status="approved", choice=None, decided_by=by, comment=comment)
    return archive.decision(decision_id)


def override(archive: Archive, decision_id: int, choice: str, *, by: str, comment: str | None = None) -> dict:
    d = archive.decision(decision_id)
    if choice not in d["candidates"]:
        raise CoevoError(f"decision {decision_id}: {choice!r} is not a candidate (candidates: "
                         f"{', '.join(map(str, d['candidates']))})")
    archive.settle_decision(decision_id, status="overridden", choice=choice, decided_by=by, comment=comment)
    return archive.decision(decision_id)
