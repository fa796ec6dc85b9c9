"""A person steers a run, beyond approving the meta-agent's proposals: enter a harness of their own as
the next round's candidate, pin the checkpoint the next round inherits, exclude a checkpoint from
inheritance (or include it again), pause a run at the next step boundary and resume it. Every act is a
decision row (status 'steer') with who and why, on the same audit trail as approvals; the round that
takes a one-shot act (a harness, a pin) records its id on the row. The CLI and the dashboard call these."""
from __future__ import annotations

from engine.archive import Archive
from engine.errors import CoevoError, InputError
from engine.harness.spec import HarnessSpec

STEER_KINDS = ("harness", "pin", "exclude", "include", "pause", "resume")


def _act(archive: Archive, kind: str, choice: str | None, *, by: str, why: str | None,
         evidence: dict | None = None) -> dict:
    if not by:
        raise InputError("who steers must be named (for the audit trail)", field="by")
    did = archive.add_decision(round_id=None, step=None, kind=kind, candidates=[choice] if choice else [],
                               evidence=evidence or {}, choice=choice, rationale=f"{kind} by {by}",
                               status="steer", decided_by=by, comment=why or None)
    return archive.decision(did)


def submit_harness(archive: Archive, text: str, *, by: str, why: str | None = None, parent: str | None = None,
                   source: str = "harness YAML") -> dict:
    """Validate a harness written as YAML (an error names its line) and enter it as a candidate: the next
    round of its task uses it instead of the editor's. `parent` is the harness it was edited from."""
    spec = HarnessSpec.from_yaml(text, source=source)
    parents = [archive.harness(parent)["id"]] if parent else []
    hid = archive.add_harness(spec.to_dict(), creator=f"person:{by}", rationale=why or "", parents=parents)
    return _act(archive, "harness", hid, by=by, why=why, evidence={"task": spec.task, "parents": parents})


def pin(archive: Archive, checkpoint: str, *, by: str, why: str | None = None) -> dict:
    """The next round inherits this checkpoint, whatever its policy would choose."""
    cid = archive.checkpoint(checkpoint)["id"]
    if cid in excluded(archive):
        raise CoevoError(f"checkpoint {cid} is excluded from inheritance: include it first")
    return _act(archive, "pin", cid, by=by, why=why)


def exclude(archive: Archive, checkpoint: str, *, by: str, why: str | None = None) -> dict:
    """No inheritance policy proposes this checkpoint until it is included again."""
    return _act(archive, "exclude", archive.checkpoint(checkpoint)["id"], by=by, why=why)


def include(archive: Archive, checkpoint: str, *, by: str, why: str | None = None) -> dict:
    cid = archive.checkpoint(checkpoint)["id"]
    if cid not in excluded(archive):
        raise CoevoError(f"checkpoint {cid} is not excluded")
    return _act(archive, "include", cid, by=by, why=why)


def pause(archive: Archive, *, by: str, why: str | None = None) -> dict:
    """Runs of this archive stop before their next step and wait until resumed."""
    if paused(archive):
        raise CoevoError("the run is paused already")
    return _act(archive, "pause", None, by=by, why=why)


def resume(archive: Archive, *, by: str, why: str | None = None) -> dict:
    if not paused(archive):
        raise CoevoError("the run is not paused")
    return _act(archive, "resume", None, by=by, why=why)


def paused(archive: Archive) -> dict | None:
    """The pause act in force, or None."""
    acts = archive.steering(("pause", "resume"))
    return acts[-1] if acts and acts[-1]["kind"] == "pause" else None


def excluded(archive: Archive) -> set[str]:
    """Checkpoints whose latest exclude/include act is an exclusion."""
    state: dict[str, str] = {}
    for act in archive.steering(("exclude", "include")):
        state[act["choice"]] = act["kind"]
    return {c for c, k in state.items() if k == "exclude"}


def next_harness(archive: Archive, task: str) -> dict | None:
    """The oldest harness candidate of this task no round has taken yet."""
    return next((a for a in archive.steering(("harness",), unapplied=True) if a["evidence"].get("task") == task),
                None)


def next_pin(archive: Archive) -> dict | None:
    """The newest pin no round has taken yet (a later pin replaces an earlier one)."""
    pins = archive.steering(("pin",), unapplied=True)
    return pins[-1] if pins else None


def state(archive: Archive, task: str | None = None) -> dict:
    """What steers the next round: the pause in force, the candidate harness, the pin, the exclusions."""
    return {"paused": paused(archive), "harness": next_harness(archive, task) if task else None,
            "harnesses": archive.steering(("harness",), unapplied=True), "pin": next_pin(archive),
            "excluded": sorted(excluded(archive))}
