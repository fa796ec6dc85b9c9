"""Whether an edited harness, with the checkpoint it inherits, may replace its parent pair. Both pairs
are probed on the same items; each rule reads the two probes (stored evaluations) and returns its verdict
with the evidence the inheritance decision records."""
from __future__ import annotations

import math

from engine.archive import Archive
from engine.registry import Registry

ACCEPTANCE: Registry = Registry("edit acceptance rule")


@ACCEPTANCE.register("not_worse")
def not_worse(archive: Archive, parent: dict, edited: dict, alpha: float) -> dict:
    """The edit stands unless the parent pair scores higher, or the same with a lower TIMR."""
    return {"accepted": (edited["score"], -edited["timr"]) >= (parent["score"], -parent["timr"])}


@ACCEPTANCE.register("not_significantly_worse")
def not_significantly_worse(archive: Archive, parent: dict, edited: dict, alpha: float) -> dict:
    """The edit stands unless the parent pair does better item by item beyond chance (a one-sided sign
    test at `alpha`, by its mid-p value). On a probe of 16 items one item is noise: an edit that loses by one
    is kept, and the round's SFT then trains the model to it; one that loses 4:0 is not."""
    test = sign_test(archive.episodes(parent["evaluation"]), archive.episodes(edited["evaluation"]))
    return {"accepted": test["p"] >= alpha, "test": {**test, "alpha": alpha}}


def outcome(episode: dict) -> tuple[int, bool]:
    """How well a pair did on one item, comparable across pairs: a success first, then a clean turn log."""
    return episode["success"], episode["mismatched_turns"] == 0


def sign_test(parent_episodes: list[dict], edited_episodes: list[dict]) -> dict:
    """Paired by item: how often each pair's outcome beats the other's, and the one-sided mid-p value of the
    parent winning that often were both pairs equally good (ties carry no information). The mid-p value
    counts the observed count at half weight: on a probe where few items differ the exact test cannot
    reach 0.05 at all below five items (4:0 has p = 1/16), the mid-p test's level stays near the nominal
    one (Lancaster 1961; Agresti, Categorical Data Analysis, 1.4.5)."""
    parent = {e["item_id"]: outcome(e) for e in parent_episodes}
    edited = {e["item_id"]: outcome(e) for e in edited_episodes}
    shared = parent.keys() & edited.keys()
    parent_wins = sum(parent[i] > edited[i] for i in shared)
    edited_wins = sum(edited[i] > parent[i] for i in shared)
    n = parent_wins + edited_wins
    p = (sum(math.comb(n, k) for k in range(parent_wins + 1, n + 1)) + math.comb(n, parent_wins) / 2) / 2 ** n
    return {"items": len(shared), "parent_wins": parent_wins, "edited_wins": edited_wins, "p": round(p, 6)}
