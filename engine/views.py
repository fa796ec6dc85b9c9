"""Read-only views of the archive for the dashboard: plain dicts and lists, cheap to cache and to draw.

Each view is a few indexed queries; none scans the turns table (the biggest by far) except for one
evaluation's episodes. The dashboard caches them keyed on the archive's version counter."""
from __future__ import annotations

import difflib
import functools
import json
from collections import Counter

import yaml

from engine.archive import Archive, probe_split
from engine.archive.lineage import checkpoint_dag, harness_dag, layered_positions, neighbourhood
from engine.run_config import STEPS
from engine.sorting import natural_key

METRICS = ("score", "timr")


def tasks(a: Archive) -> list[str]:
    return [r["task"] for r in a.query("SELECT DISTINCT json_extract(spec, '$.task') AS task FROM harnesses "
                                       "WHERE task IS NOT NULL ORDER BY task")]


def task_splits(a: Archive) -> list[dict]:
    """Every (task, split) with evaluations, the most evaluated first."""
    return a.query("SELECT task, split, COUNT(*) AS evaluations FROM evaluations WHERE split NOT LIKE '%:probe' "
                   "GROUP BY task, split ORDER BY evaluations DESC, task, split")


# -- overview ------------------------------------------------------------------------------------
def overview(a: Archive) -> dict:
    totals = a.query(
        "SELECT (SELECT COUNT(*) FROM harnesses) AS harnesses, (SELECT COUNT(*) FROM checkpoints) AS checkpoints, "
        "(SELECT COUNT(*) FROM evaluations) AS evaluations, (SELECT COUNT(*) FROM datasets) AS datasets, "
        "(SELECT COALESCE(SUM(turns), 0) FROM evaluations) AS turns, "
        "(SELECT COALESCE(SUM(mismatched_turns), 0) FROM evaluations) AS mismatched_turns")[0]
    return {
        "totals": totals,
        "baselines": baselines(a),
        "live": live(a),
        "rounds": rounds(a),
        "best": best_pairs(a),
        "pending": [_decision(d) for d in a.query("SELECT * FROM decisions WHERE status = 'proposed' ORDER BY id")],
        "jobs": a.query("SELECT id, kind, state, progress, total, message, created_at FROM jobs "
                        "WHERE state IN ('queued', 'running') ORDER BY id DESC"),
    }


def baselines(a: Archive) -> list[dict]:
    """Per task split with a served model evaluated: the served models' best scores beside the best
    co-evolved pair's on the same split (`coevo baselines` fills it)."""
    endpoints = {r["id"]: r["name"] for r in a.query("SELECT id, name FROM checkpoints WHERE kind = 'endpoint'")}
    if not endpoints:
        return []
    marks = ", ".join("?" * len(endpoints))
    splits = a.query(f"SELECT DISTINCT task, split FROM evaluations WHERE checkpoint_id IN ({marks})", list(endpoints))
    out = []
    for ts in splits:
        for r in a.query(
                "SELECT e.harness_id, e.checkpoint_id, e.score, e.timr, e.episodes, c.round FROM (SELECT *, "
                "ROW_NUMBER() OVER (PARTITION BY checkpoint_id ORDER BY score DESC, timr, id) AS rank FROM evaluations "
                "WHERE task = ? AND split = ?) e JOIN checkpoints c ON c.id = e.checkpoint_id WHERE e.rank = 1 "
                "ORDER BY e.score DESC", (ts["task"], ts["split"])):
            if r["checkpoint_id"] in endpoints or r["round"] is not None:  # served, or made by a round
                out.append({"task": ts["task"], "split": ts["split"],
                            "model": endpoints.get(r["checkpoint_id"], r["checkpoint_id"]),
                            "kind": "served" if r["checkpoint_id"] in endpoints else "co-evolved",
                            "harness": r["harness_id"], "score": r["score"], "timr": r["timr"], "n": r["episodes"]})
    return out


def live(a: Archive) -> dict | None:
    """The round in progress: its steps done, the step it is at, the job that runs it, and a person's
    pause in force; None when no round is open."""
    open_ = a.query("SELECT id, mode, created_at FROM rounds WHERE state != 'done' ORDER BY id LIMIT 1")
    if not open_:
        return None
    r = open_[0]
    done = {s["step"] for s in a.query("SELECT step FROM round_steps WHERE round_id = ? AND state = 'done'",
                                       (r["id"],))}
    current = next((s for s in STEPS if s not in done), None)
    job = a.query("SELECT id, state, progress, total, message FROM jobs WHERE kind = 'round' "
                  "AND state IN ('queued', 'running') ORDER BY id DESC LIMIT 1")
    pause = a.query("SELECT kind, decided_by, comment, decided_at FROM decisions WHERE status = 'steer' "
                    "AND kind IN ('pause', 'resume') ORDER BY id DESC LIMIT 1")
    return {**r, "steps": [{"step": s, "done": s in done} for s in STEPS], "current": current,
            "done": len(done), "total": len(STEPS), "job": job[0] if job else None,
            "paused": pause[0] if pause and pause[0]["kind"] == "pause" else None}


def rounds(a: Archive) -> list[dict]:
    """Every round with the evaluation it ended on (NULL while it runs)."""
    out = []
    for r in a.query("SELECT r.id, r.mode, r.state, r.config, r.created_at, r.finished_at, s.result, "
                     "(SELECT COUNT(*) FROM round_steps WHERE round_id = r.id AND state = 'done') AS steps_done "
                     "FROM rounds r LEFT JOIN round_steps s ON s.round_id = r.id AND s.step = 'evaluate' "
                     "ORDER BY r.id"):
        result = json.loads(r.pop("result") or "{}")
        config = json.loads(r.pop("config") or "{}")
        out.append({**r, "task": config.get("task"), "split": config.get("split"),
                    **{k: result.get(k) for k in ("evaluation", "harness", "checkpoint", "score", "timr")}})
    return out


def best_pairs(a: Archive) -> list[dict]:
    """Per task and split, the best (harness, checkpoint) pair: highest score, then lowest TIMR."""
    return a.query(
        "SELECT task, split, harness_id AS harness, checkpoint_id AS checkpoint, id AS evaluation, score, timr "
        "FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY task, split ORDER BY score DESC, timr ASC, id) AS rank "
        "FROM evaluations WHERE split NOT LIKE '%:probe') WHERE rank = 1 ORDER BY task, split")


# -- lineage -------------------------------------------------------------------------------------
def lineage(a: Archive, task: str | None, split: str | None) -> dict:
    """Both DAGs with a layered layout, each node carrying its best evaluation on (task, split), and
    the harness x checkpoint relation: which checkpoint was trained, or chosen, under which harness."""
    best_h = _best_by(a, "harness_id", task, split)
    best_c = _best_by(a, "checkpoint_id", task, split)
    return {
        "harnesses": _graph(harness_dag(a), best_h),
        "checkpoints": _graph(checkpoint_dag(a), best_c),
        "relation": relation(a),
    }


def _graph(dag, best: dict) -> dict:
    pos = layered_positions(dag)
    nodes = [{**dag.nodes[n], "id": n, "x": pos[n][0], "y": pos[n][1],
              "score": best.get(n, {}).get("score"), "timr": best.get(n, {}).get("timr"),
              "parents": dag.in_degree(n), "children": dag.out_degree(n)} for n in dag.nodes]
    edges = [{"source": u, "target": v, **d} for u, v, d in dag.edges(data=True)]
    return {"nodes": nodes, "edges": edges}


def neighbours(graph: dict, node: str, hops: int) -> dict:
    """A lineage graph narrowed to the nodes within `hops` edges of `node`."""
    import networkx as nx
    g = nx.DiGraph([(e["source"], e["target"]) for e in graph["edges"]])
    g.add_nodes_from(n["id"] for n in graph["nodes"])
    keep = neighbourhood(g, node, hops) if node in g else set()
    return {"nodes": [n for n in graph["nodes"] if n["id"] in keep],
            "edges": [e for e in graph["edges"] if e["source"] in keep and e["target"] in keep]}


def _best_by(a: Archive, column: str, task, split) -> dict[str, dict]:
    where, params = ("WHERE task = ? AND split = ?", (task, split)) if task else ("", ())
    rows = a.query(
        f"SELECT node, score, timr FROM (SELECT {column} AS node, score, timr, ROW_NUMBER() OVER "
        f"(PARTITION BY {column} ORDER BY score DESC, timr ASC, id) AS rank FROM evaluations {where}) "
        "WHERE rank = 1", params)
    return {r["node"]: r for r in rows}


def relation(a: Archive) -> list[dict]:
    """(harness, checkpoint, how): 'trained under' from the checkpoint's data, 'chosen for' from the
    inheritance decisions (the checkpoint a round's new harness started from)."""
    trained = a.query("SELECT harness_id AS harness, id AS checkpoint, 'trained under' AS how, round "
                      "FROM checkpoints WHERE harness_id IS NOT NULL")
    chosen = a.query(
        "SELECT json_extract(s.result, '$.harness') AS harness, d.choice AS checkpoint, 'chosen for' AS how, "
        "d.round_id AS round FROM decisions d JOIN round_steps s ON s.round_id = d.round_id AND s.step = 'edit' "
        "WHERE d.kind = 'inheritance' AND d.status != 'proposed'")
    return trained + [r for r in chosen if r["harness"] and r["checkpoint"]]


def harness_detail(a: Archive, hid: str) -> dict:
    h = a.harness(hid)
    return {
        **{k: h[k] for k in ("id", "name", "interface", "creator", "rationale", "round", "created_at", "parents")},
        "spec_yaml": spec_yaml(h["spec"]),
        "children": [r["child"] for r in a.query("SELECT child FROM harness_parents WHERE parent = ? ORDER BY child",
                                                 (h["id"],))],
        "checkpoints": [r for r in relation(a) if r["harness"] == h["id"]],
        "evaluations": a.query("SELECT id, checkpoint_id AS checkpoint, task, split, score, timr, turns, round "
                               "FROM evaluations WHERE harness_id = ? ORDER BY id DESC LIMIT 500", (h["id"],)),
    }


def checkpoint_detail(a: Archive, cid: str) -> dict:
    c = a.checkpoint(cid)
    dataset = a.dataset(c["dataset_id"]) if c["dataset_id"] else None
    return {
        **{k: c[k] for k in ("id", "name", "kind", "path", "harness_id", "round", "created_at", "parents")},
        "recipe_yaml": yaml.safe_dump(c["recipe"], sort_keys=False) if c["recipe"] else "",
        "dataset": dataset,
        "children": a.query("SELECT child, role FROM checkpoint_parents WHERE parent = ? ORDER BY child", (c["id"],)),
        "harnesses": [r for r in relation(a) if r["checkpoint"] == c["id"]],
        "evaluations": a.query(
            "SELECT id, harness_id AS harness, task, split, score, timr, turns, round FROM evaluations "
            "WHERE checkpoint_id = ? ORDER BY id DESC LIMIT 500", (c["id"],)),
    }


# -- heatmaps ------------------------------------------------------------------------------------
def matrix(a: Archive, task: str, split: str) -> dict:
    """The newest full evaluation of every (harness, checkpoint) pair, and the newest inheritance probe
    of every pair without one (marked `probe`, with its n); rows and columns in lineage order and in
    score order. The cells are columns (a list per field, `kinds` as text): a filled 500 x 500 matrix is
    tens of thousands of cells, and columns build, cache and draw several times faster than dicts."""
    full = _cells(a, task, split)
    probes = _cells(a, task, probe_split(split))
    have = set(zip(full[0], full[1]))
    keep = [i for i, pair in enumerate(zip(probes[0], probes[1])) if pair not in have]
    cols = [f + [p[i] for i in keep] for f, p in zip(full, probes)]
    cells = dict(zip(("harness", "checkpoint", "id", "score", "timr", "n", "kinds"), cols))
    cells["probe"] = [False] * len(full[0]) + [True] * len(keep)
    cells["kinds"] = [_kinds_text(k) for k in cells["kinds"]]
    names_h = {r["id"]: r["name"] for r in a.query("SELECT id, name FROM harnesses")}
    names_c = {r["id"]: r["name"] for r in a.query("SELECT id, name FROM checkpoints")}
    rows, columns = set(cells["harness"]), set(cells["checkpoint"])
    return {"task": task, "split": split, "cells": cells, "size": len(cells["id"]),
            "harnesses": [{"id": h, "name": names_h.get(h, h)} for h in sorted(rows, key=natural_key)],
            "checkpoints": [{"id": c, "name": names_c.get(c, c)} for c in sorted(columns, key=natural_key)],
            "orders": {"lineage": {"rows": lineage_order(harness_dag(a), rows),
                                   "cols": lineage_order(checkpoint_dag(a), columns)},
                       "score": {"rows": _by_score(cells, "harness", rows),
                                 "cols": _by_score(cells, "checkpoint", columns)}}}


def cell_rows(m: dict) -> list[dict]:
    """A matrix's cells as one dict each."""
    keys = list(m["cells"])
    return [dict(zip(keys, values)) for values in zip(*m["cells"].values())]


def _cells(a: Archive, task: str, split: str) -> list[list]:
    """The newest evaluation of every pair on a task split, as columns: harness, checkpoint, id, score,
    timr, n, mismatch kinds (JSON)."""
    # SQLite takes the bare columns from the row of MAX(id); the evaluations_cells index covers them all
    rows = a.conn.execute(
        "SELECT harness_id, checkpoint_id, MAX(id), score, timr, episodes, mismatch_kinds FROM evaluations "
        "WHERE task = ? AND split = ? GROUP BY harness_id, checkpoint_id", (task, split)).fetchall()
    return [list(col) for col in zip(*rows)] if rows else [[] for _ in range(7)]


@functools.lru_cache(maxsize=65536)
def _kinds_text(kinds_json: str) -> str:
    if kinds_json == "{}":
        return "none"
    return " · ".join(f"{k} {n}" for k, n in json.loads(kinds_json).items())


def lineage_order(dag, keep: set[str]) -> list[str]:
    """The nodes of `keep` in lineage order: each root, then its descendants depth first (children by id)."""
    import networkx as nx
    order, seen = [], set()
    for root in sorted((n for n in dag if dag.in_degree(n) == 0), key=natural_key):
        for n in nx.dfs_preorder_nodes(dag, root, sort_neighbors=lambda ns: sorted(ns, key=natural_key)):
            if n not in seen:
                seen.add(n)
                order.append(n)
    return [n for n in order if n in keep] + sorted(keep - seen, key=natural_key)


def _by_score(cells: dict, key: str, ids: set[str]) -> list[str]:
    """Best full score first (probe-only rows after), then by id."""
    best: dict[str, float] = {}
    for k, score, probe in zip(cells[key], cells["score"], cells["probe"]):
        if not probe and score > best.get(k, -1.0):
            best[k] = score
    return sorted(ids, key=lambda i: (-best.get(i, -1.0), natural_key(i)))


# -- co-lineage ----------------------------------------------------------------------------------
def co_lineage(a: Archive, task: str, split: str) -> dict:
    """The (harness, checkpoint) pairs a run moved through: nodes are evaluated pairs (the seed pairs and
    every round's pair and parent pair), edges a round's move from its parent pair to its new pair,
    labelled with the edit operator and the inheritance choice. Nodes sit at the round that made them
    (0: made outside rounds), in lanes by harness lineage order."""
    h, c, ids, scores, timrs, ns, _ = _cells(a, task, split)
    cells = {(hh, cc): {"checkpoint": cc, "id": i, "score": s, "timr": t, "n": n}
             for hh, cc, i, s, t, n in zip(h, c, ids, scores, timrs, ns)}
    steps: dict[int, dict] = {}
    for r in a.query(
            "SELECT s.round_id, s.step, s.result, json_extract(r.config, '$.task') AS task, "
            "json_extract(r.config, '$.split') AS split FROM round_steps s JOIN rounds r ON r.id = s.round_id "
            "WHERE s.state = 'done' AND s.step IN ('curate', 'edit', 'inherit', 'sft', 'evaluate')"):
        if (r["task"], r["split"]) == (task, split):
            steps.setdefault(r["round_id"], {})[r["step"]] = json.loads(r["result"])
    decisions = {d["id"]: d for d in a.query(
        "SELECT id, kind, choice, json_extract(evidence, '$.policy') AS policy, "
        "json_extract(evidence, '$.merge.models') AS merged, "
        "json_extract(evidence, '$.weights.' || choice || '.checkpoint') AS parent_checkpoint "
        "FROM decisions WHERE kind IN ('parents', 'inheritance') AND status != 'proposed'")}
    best_of: dict[str, tuple] = {}  # harness -> its best full cell (the curator's view of it)
    for (h, _), c in cells.items():
        if h not in best_of or (c["score"], -c["timr"]) > (best_of[h]["score"], -best_of[h]["timr"]):
            best_of[h] = c
    edges, made_in = [], {}
    for rid in sorted(steps):
        st = steps[rid]
        ev = st.get("evaluate")
        if not ev or "curate" not in st:
            continue
        target = (ev["harness"], ev["checkpoint"])
        made_in.setdefault(target, rid)
        parent_h = st["curate"]["parents"][0]
        chose = decisions.get(st["curate"].get("decision"), {})
        inherit = st.get("inherit", {})
        parent_c = chose.get("parent_checkpoint") or (best_of[parent_h]["checkpoint"] if parent_h in best_of
                                                      else inherit.get("checkpoint"))
        d = decisions.get(inherit.get("decision"), {})
        policy = d.get("policy") or "fixed"
        how = (f"merge {'+'.join(json.loads(d['merged']))}" if policy == "merge" and d.get("merged")
               else f"{policy} {inherit.get('checkpoint', '')}".strip())
        operator = st.get("edit", {}).get("operator") or "fixed harness"
        if inherit.get("harness"):  # the edit probed worse than the parent pair: the round kept the parent
            operator += " rejected"
        trained = " + SFT" if st.get("sft", {}).get("trained") else ""
        edges.append({"source": (parent_h, parent_c), "target": target, "round": rid,
                      "label": f"r{rid}: {operator} · {how}{trained}"})
    seeds = {h["id"] for h in a.query("SELECT id FROM harnesses WHERE creator = 'seed'")}
    pairs = {p for p in cells if p[0] in seeds and p not in made_in}
    pairs |= {e["source"] for e in edges} | {e["target"] for e in edges}
    lanes = {h: i for i, h in enumerate(lineage_order(harness_dag(a), {p[0] for p in pairs}))}
    names_h = {r["id"]: r["name"] for r in a.query("SELECT id, name FROM harnesses")}
    nodes = []
    ordered = sorted(pairs, key=lambda p: (made_in.get(p, 0), lanes[p[0]], natural_key(p[1])))
    per_spot = Counter((made_in.get(p, 0), lanes[p[0]]) for p in ordered)
    seen: Counter = Counter()
    for p in ordered:
        c = cells.get(p, {})
        spot = (made_in.get(p, 0), lanes[p[0]])
        # pairs of one harness made in one round (the seeds' several checkpoints) side by side in its lane
        x = spot[0] + (0.0 if per_spot[spot] == 1 else 0.7 * (seen[spot] / (per_spot[spot] - 1) - 0.5))
        seen[spot] += 1
        nodes.append({"id": f"{p[0]} x {p[1]}", "harness": p[0], "checkpoint": p[1], "x": x,
                      "harness_name": names_h.get(p[0], p[0]), "round": made_in.get(p, 0), "lane": lanes[p[0]],
                      "evaluation": c.get("id"), "score": c.get("score"), "timr": c.get("timr"), "n": c.get("n")})
    return {"task": task, "split": split, "nodes": nodes,
            "edges": [{**e, "source": f"{e['source'][0]} x {e['source'][1]}",
                       "target": f"{e['target'][0]} x {e['target'][1]}"} for e in edges]}


# -- trajectories --------------------------------------------------------------------------------
def newest_evaluation(a: Archive) -> int | None:
    """The newest full evaluation (not a probe)."""
    return a.query("SELECT MAX(id) AS id FROM evaluations WHERE split NOT LIKE '%:probe'")[0]["id"]


def evaluation(a: Archive, eid: int) -> dict:
    e = a.evaluation(eid)
    e["harness_name"] = a.harness(e["harness_id"])["name"]
    e["checkpoint_name"] = a.checkpoint(e["checkpoint_id"])["name"]
    e["top_answer"], e["top_answer_share"] = top_answer(a, eid)
    return e


def top_answer(a: Archive, eid: int) -> tuple[str, float]:
    """The prediction an evaluation gives most often and its share of the episodes: a pair that learned
    one safe answer (error_input, a refusal) scores on the rows where it is right and nowhere else."""
    prediction, share = top_prediction(a, eid)
    return (prediction or "(none)")[:60] if share else "-", share


def top_prediction(a: Archive, eid: int) -> tuple[str | None, float]:
    """The most frequent prediction as stored (JSON; None for none) and its share of the episodes."""
    rows = a.query("SELECT prediction, COUNT(*) AS n FROM episodes WHERE evaluation_id = ? "
                   "GROUP BY prediction ORDER BY n DESC, prediction LIMIT 1", (eid,))
    total = a.query("SELECT COUNT(*) AS n FROM episodes WHERE evaluation_id = ?", (eid,))[0]["n"]
    if not rows or not total:
        return None, 0.0
    return rows[0]["prediction"], rows[0]["n"] / total


def evaluations_of(a: Archive, task: str, split: str, harness: str | None = None,
                   checkpoint: str | None = None) -> list[dict]:
    sql = ("SELECT id, harness_id AS harness, checkpoint_id AS checkpoint, score, timr, round, created_at "
           "FROM evaluations WHERE task = ? AND split = ?")
    params: list = [task, split]
    if harness:
        sql, params = sql + " AND harness_id = ?", params + [harness]
    if checkpoint:
        sql, params = sql + " AND checkpoint_id = ?", params + [checkpoint]
    return a.query(sql + " ORDER BY id DESC LIMIT 1000", params)


def episodes(a: Archive, eid: int, success: bool | None = None, mismatch: bool | None = None) -> list[dict]:
    sql, params = "SELECT idx, item_id, sample, success, reward, turns, mismatched_turns, prediction " \
                  "FROM episodes WHERE evaluation_id = ?", [eid]
    if success is not None:
        sql, params = sql + " AND success = ?", params + [int(success)]
    if mismatch is not None:
        sql += " AND mismatched_turns > 0" if mismatch else " AND mismatched_turns = 0"
    return a.query(sql + " ORDER BY idx", params)


def episode(a: Archive, eid: int, idx: int) -> dict:
    ep = a.query("SELECT * FROM episodes WHERE evaluation_id = ? AND idx = ?", (eid, idx))
    if not ep:
        from engine.archive.store import ArchiveError
        raise ArchiveError(f"{a.path}: evaluation {eid} has no episode {idx}")
    return {**ep[0], "turns": a.turns(eid, idx)}


# -- decisions -----------------------------------------------------------------------------------
def _decision(row: dict) -> dict:
    return {**row, "candidates": json.loads(row["candidates"]), "evidence": json.loads(row["evidence"])}


def decisions(a: Archive) -> dict:
    """Pending decisions with what a person needs to judge them, and the audit trail of the rest."""
    pending = []
    for d in a.query("SELECT * FROM decisions WHERE status = 'proposed' ORDER BY id"):
        d = _decision(d)
        d["table"] = candidate_table(d)
        d["harness_diff"] = round_harness_diff(a, d["round_id"])
        pending.append(d)
    trail = a.query("SELECT id, round_id, step, kind, choice, status, decided_by, comment, rationale, decided_at "
                    "FROM decisions WHERE status != 'proposed' ORDER BY id DESC LIMIT 1000")
    return {"pending": pending, "trail": trail}


def candidate_table(d: dict) -> list[dict]:
    """One row per candidate with its evidence: curator weights or inheritance probe results."""
    ev = d["evidence"]
    per = ev.get("weights") or ev.get("probe") or {}
    rows = []
    for c in d["candidates"]:
        info = per.get(str(c), {})
        info = info if isinstance(info, dict) else {"weight": info}
        rows.append({"candidate": c, "proposed": c == d["choice"], **info})
    return rows


def round_harness_diff(a: Archive, round_id: int | None) -> dict | None:
    """The harness a round edited, diffed against its parent (None before the edit step)."""
    if round_id is None:
        return None
    edit = a.step_result(round_id, "edit")
    if not edit or not edit.get("harness"):
        return None
    child = a.harness(edit["harness"])
    if not child["parents"]:
        return None
    parent = a.harness(child["parents"][0])
    return {"child": child["id"], "parent": parent["id"], "rationale": child["rationale"],
            "diff": spec_diff(parent["spec"], child["spec"], parent["id"], child["id"])}


def spec_yaml(spec: dict) -> str:
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100)


def spec_diff(old: dict, new: dict, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(spec_yaml(old).splitlines(True), spec_yaml(new).splitlines(True),
                                        fromfile=old_name, tofile=new_name))


# -- compare -------------------------------------------------------------------------------------
def compare(a: Archive, kind: str, left: str, right: str) -> dict:
    """Two harnesses or two checkpoints: their spec (or recipe) diff, per-task results, and the
    evaluations where the other side of the pair is the same (the fair comparison)."""
    if kind == "harness":
        x, y = a.harness(left), a.harness(right)
        diff = spec_diff(x["spec"], y["spec"], x["id"], y["id"])
        column, other = "harness_id", "checkpoint_id"
    elif kind == "checkpoint":
        x, y = a.checkpoint(left), a.checkpoint(right)
        diff = "".join(difflib.unified_diff(
            yaml.safe_dump(_checkpoint_card(x), sort_keys=False).splitlines(True),
            yaml.safe_dump(_checkpoint_card(y), sort_keys=False).splitlines(True),
            fromfile=x["id"], tofile=y["id"]))
        column, other = "checkpoint_id", "harness_id"
    else:
        raise ValueError(f"compare: kind must be 'harness' or 'checkpoint', not {kind!r}")
    by_task = a.query(
        f"SELECT {column} AS side, task, split, COUNT(*) AS evaluations, MAX(score) AS best_score, "
        f"AVG(score) AS mean_score, AVG(timr) AS mean_timr, MIN(timr) AS min_timr FROM evaluations "
        f"WHERE {column} IN (?, ?) GROUP BY {column}, task, split ORDER BY task, split, side", (x["id"], y["id"]))
    paired = a.query(
        f"SELECT l.task, l.split, l.{other} AS shared, l.score AS left_score, l.timr AS left_timr, "
        f"r.score AS right_score, r.timr AS right_timr FROM evaluations l JOIN evaluations r "
        f"ON r.{other} = l.{other} AND r.task = l.task AND r.split = l.split AND r.{column} = ? "
        f"WHERE l.{column} = ? AND l.id = (SELECT MAX(id) FROM evaluations WHERE {column} = l.{column} "
        f"AND {other} = l.{other} AND task = l.task AND split = l.split) "
        f"AND r.id = (SELECT MAX(id) FROM evaluations WHERE {column} = r.{column} AND {other} = r.{other} "
        f"AND task = r.task AND split = r.split) ORDER BY l.task, l.split, l.{other} LIMIT 1000",
        (y["id"], x["id"]))
    return {"kind": kind, "left": x["id"], "right": y["id"], "diff": diff, "by_task": by_task, "paired": paired}


def _checkpoint_card(c: dict) -> dict:
    return {k: c[k] for k in ("name", "kind", "harness_id", "dataset_id", "round", "parents", "recipe")}


def datasets(a: Archive) -> list[dict]:
    return a.query("SELECT id, task, source, harness_id, checkpoint_id, kept, samples FROM datasets ORDER BY rowid")


def ids(a: Archive, kind: str) -> list[dict]:
    table = {"harness": "harnesses", "checkpoint": "checkpoints"}[kind]
    return a.query(f"SELECT id, name FROM {table} ORDER BY rowid")
