"""The dense mismatch matrix: inheritance probes stored as marked evaluations, `coevo matrix --fill`."""
from conftest import coevo, copy_default

from engine import views
from engine.archive import Archive, is_probe
from engine.matrix import top_pairs


def test_fill_evaluates_every_pair_of_the_top_k_and_probe_cells_stay_marked(one_round, tmp_path):
    path = copy_default(one_round, tmp_path)
    with Archive(path, readonly=True) as a:
        probes = [e for e in a.evaluations() if is_probe(e["split"])]
        before = views.matrix(a, "smart_home", "dev")
    # every probe of round 1 is an evaluation on its own split, with its n
    assert probes and all(e["split"] == "dev:probe" and e["round"] == 1 for e in probes)
    probe_cells = [c for c in views.cell_rows(before) if c["probe"]]
    assert probe_cells and all(c["n"] in (4, 8) for c in probe_cells)  # the run's probe: 4 items, then 8

    out = coevo("matrix", "--fill", "--top", "3", "--task", "smart_home", "--archive", str(path))
    assert "filled:" in out.stdout, out.stdout + out.stderr
    with Archive(path, readonly=True) as a:
        harnesses, checkpoints = top_pairs(a, "smart_home", "dev", 3)
        cells = views.cell_rows(views.matrix(a, "smart_home", "dev"))
        full = {(c["harness"], c["checkpoint"]) for c in cells if not c["probe"]}
        n_evals = len(a.evaluations())
    round_pair = one_round_pair(path)
    assert len(harnesses) in (3, 4) and len(checkpoints) in (3, 4)  # the top 3, and the round's pair if not in it
    assert round_pair[0] in harnesses and round_pair[1] in checkpoints
    assert {(h, c) for h in harnesses for c in checkpoints} <= full
    # a pair with a full evaluation is a full cell even where a probe exists
    assert all(not c["probe"] for c in cells if (c["harness"], c["checkpoint"]) in full)
    assert all(c["probe"] for c in cells if (c["harness"], c["checkpoint"]) not in full)
    # filled cells carry n and mismatch kinds for the hover
    assert all(c["n"] == 24 for c in cells if not c["probe"])
    kinds = ("unparseable", "wrong schema", "unknown tool", "wrong arguments")
    assert all(c["kinds"] == "none" or all(part.rsplit(" ", 1)[0] in kinds for part in c["kinds"].split(" · "))
               for c in cells)
    assert any(c["kinds"] != "none" for c in cells)
    # the top does not move when filled: a second fill evaluates nothing
    out = coevo("matrix", "--fill", "--top", "3", "--task", "smart_home", "--archive", str(path))
    assert "filled: 0 pairs evaluated" in out.stdout
    with Archive(path, readonly=True) as a:
        assert len(a.evaluations()) == n_evals


def one_round_pair(path) -> tuple[str, str]:
    with Archive(path, readonly=True) as a:
        ev = a.step_result(1, "evaluate")
    return ev["harness"], ev["checkpoint"]


def test_co_lineage_has_the_rounds_move_from_its_parent_pair(one_round):
    with Archive(one_round[0], readonly=True) as a:
        g = views.co_lineage(a, "smart_home", "dev")
        curate, inherit = a.step_result(1, "curate"), a.step_result(1, "inherit")
        edit = a.step_result(1, "edit")
    (edge,) = g["edges"]
    harness, checkpoint = one_round_pair(one_round[0])
    assert edge["target"] == f"{harness} x {checkpoint}"
    assert edge["source"].startswith(curate["parents"][0] + " x ")
    assert edit["operator"] in edge["label"] and inherit["checkpoint"] in edge["label"]
    nodes = {n["id"]: n for n in g["nodes"]}
    assert nodes[edge["target"]]["round"] == 1 and nodes[edge["target"]]["evaluation"]
    assert nodes[edge["source"]]["round"] == 0
