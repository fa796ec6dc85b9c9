"""One self-contained HTML report of a run, for people who were not at the dashboard: the run's settings,
score and TIMR per round, the ablation table when there is one, the best pair against the seed pairs,
the co-lineage graph, the heatmap, and three example trajectories (a success, a mismatch, a mismatch that
co-evolution fixed). plotly.js is embedded once; nothing is fetched when the file opens."""
from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from pathlib import Path

import yaml

from engine import figures, views
from engine.archive import Archive

STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 1180px;
       color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.4rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .92rem; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: .6rem; overflow-x: auto; white-space: pre-wrap; font-size: .85rem; }
.turn { border: 1px solid #ddd; border-radius: 6px; padding: .5rem .8rem; margin: .5rem 0; }
.mismatch { border-left: 5px solid #c0392b; } .parsed { border-left: 5px solid #27ae60; }
.muted { color: #777; font-size: .9rem; }
"""


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return '<p class="muted">(none)</p>'
    columns = columns or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(r.get(c), c) for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(v, column: str) -> str:
    if isinstance(v, float):
        text = f"{v:.1%}" if "timr" in column.lower() else f"{v:.3f}"
        return f'<td class="num">{text}</td>'
    return f"<td>{html.escape('-' if v is None else str(v))}</td>"


class _Figures:
    """Figures as divs: the first one carries plotly.js inline, the others reuse it."""

    def __init__(self):
        self.first = True

    def __call__(self, fig) -> str:
        out = fig.to_html(full_html=False, include_plotlyjs=self.first, config={"displaylogo": False})
        self.first = False
        return out


def main_task_split(a: Archive) -> tuple[str, str] | None:
    """The task and split of the newest round, else the most evaluated one."""
    for r in reversed(views.rounds(a)):
        if r["task"]:
            return r["task"], r["split"]
    ts = views.task_splits(a)
    return (ts[0]["task"], ts[0]["split"]) if ts else None


def ablation(a: Archive) -> list[dict]:
    """Score / TIMR per round of each mode of `coevo ablate` (its archives sit beside this one)."""
    rows: dict[int, dict] = {}
    for folder in sorted(a.path.parent.glob(a.path.stem + ".ablate-seed*")):
        for db in sorted(folder.glob("*.db")):
            with Archive(db, readonly=True) as m:
                done = [r for r in views.rounds(m) if r["state"] == "done" and r["score"] is not None]
            for i, r in enumerate(done, 1):
                rows.setdefault(i, {"round": i})[db.stem] = f"{r['score']:.3f} / {r['timr']:.1%}"
    return [rows[k] for k in sorted(rows)]


def seed_pairs(a: Archive, task: str, split: str) -> list[dict]:
    return a.query(
        "SELECT e.harness_id AS harness, h.name AS harness_name, e.checkpoint_id AS checkpoint, "
        "c.name AS checkpoint_name, e.score, e.timr, e.episodes AS n, e.id AS evaluation FROM evaluations e "
        "JOIN harnesses h ON h.id = e.harness_id JOIN checkpoints c ON c.id = e.checkpoint_id "
        "WHERE e.task = ? AND e.split = ? AND h.creator = 'seed' AND c.round IS NULL "
        "ORDER BY e.score DESC, e.timr, e.id", (task, split))


def examples(a: Archive, task: str, split: str, best_eval: int | None) -> list[tuple[str, dict]]:
    """(title, episode) for a success, a mismatch, and a fixed mismatch: an item that mismatched in an
    earlier evaluation and succeeds without one under the best pair."""
    out = []
    pick = ("SELECT ep.evaluation_id AS eid, ep.idx, ep.item_id FROM episodes ep JOIN evaluations e "
            "ON e.id = ep.evaluation_id WHERE e.task = ? AND e.split = ? AND {} ORDER BY {} LIMIT 1")
    success = a.query(pick.format("ep.success = 1 AND ep.mismatched_turns = 0" +
                                  (" AND e.id = ?" if best_eval else ""), "ep.evaluation_id DESC, ep.idx"),
                      (task, split) + ((best_eval,) if best_eval else ()))
    mismatch = a.query(pick.format("ep.mismatched_turns > 0", "e.timr DESC, ep.evaluation_id, ep.idx"), (task, split))
    if success:
        out.append(("A success (the best pair)", views.episode(a, success[0]["eid"], success[0]["idx"])))
    if mismatch:
        out.append(("A mismatch", views.episode(a, mismatch[0]["eid"], mismatch[0]["idx"])))
    if best_eval:
        fixed = a.query(
            "SELECT old.evaluation_id AS old_eid, old.idx AS old_idx, new.idx AS new_idx FROM episodes new "
            "JOIN episodes old ON old.item_id = new.item_id AND old.evaluation_id < new.evaluation_id "
            "JOIN evaluations e ON e.id = old.evaluation_id WHERE new.evaluation_id = ? AND new.success = 1 "
            "AND new.mismatched_turns = 0 AND old.mismatched_turns > 0 AND e.task = ? AND e.split = ? "
            "ORDER BY old.evaluation_id, old.idx LIMIT 1", (best_eval, task, split))
        if fixed:
            f = fixed[0]
            out.append(("A fixed mismatch: before", views.episode(a, f["old_eid"], f["old_idx"])))
            out.append(("A fixed mismatch: after, under the best pair", views.episode(a, best_eval, f["new_idx"])))
    return out


def _episode_html(title: str, ep: dict, a: Archive) -> str:
    ev = a.evaluation(ep["evaluation_id"])
    parts = [f"<h3>{html.escape(title)}</h3><p class='muted'>evaluation {ev['id']}: {ev['harness_id']} x "
             f"{ev['checkpoint_id']} · item {html.escape(ep['item_id'])} · "
             f"{'success' if ep['success'] else 'failure'}</p>"]
    if ep["input"]:
        parts.append(f"<p><b>Input:</b> {html.escape(ep['input'])}</p>")
    for t in ep["turns"]:
        verdict = (f"<b style='color:#c0392b'>MISMATCH</b>: {html.escape(t['parse_error'] or '')}" if t["mismatch"]
                   else "<b style='color:#27ae60'>parsed</b>")
        parts.append(f"<div class='turn {'mismatch' if t['mismatch'] else 'parsed'}'><b>Turn {t['turn']}</b> · "
                     f"{verdict}<pre>{html.escape(t['output'])}</pre><p class='muted'>feedback: "
                     f"{html.escape(t['feedback'] or '-')}</p></div>")
    return "".join(parts)


def build_report(a: Archive) -> str:
    fig = _Figures()
    ts = main_task_split(a)
    rounds = views.rounds(a)
    settings = json.loads(a.rounds()[-1]["config"]) if rounds else {}
    out = [f"<h1>CoEvo-RSI report</h1><p class='muted'>{html.escape(str(a.path))} · generated "
           f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC · archive version {a.version()}</p>"]
    out.append("<h2 id='settings'>Run settings</h2>")
    out.append(f"<pre>{html.escape(yaml.safe_dump(settings, sort_keys=False))}</pre>" if settings
               else "<p class='muted'>No round has run.</p>")
    out.append("<h2 id='rounds'>Score and TIMR per round</h2>")
    if rounds:
        out.append(fig(figures.rounds(rounds)))
        out.append(_table(rounds, ["id", "mode", "state", "task", "split", "harness", "checkpoint", "score", "timr"]))
    else:
        out.append("<p class='muted'>No round yet.</p>")
    out.append("<h2 id='ablation'>Ablation</h2>")
    ab = ablation(a)
    out.append(_table(ab) + "<p class='muted'>score / TIMR per round of each mode, from one start</p>" if ab
               else "<p class='muted'>No ablation beside this archive (`coevo ablate`).</p>")
    out.append("<h2 id='best'>The best pair against the seed pairs</h2>")
    best_eval = None
    if ts:
        best = [b for b in views.best_pairs(a) if (b["task"], b["split"]) == ts]
        best_eval = best[0]["evaluation"] if best else None
        out.append(f"<p>{html.escape(ts[0])} / {html.escape(ts[1])}</p>")
        out.append("<h3>Best pair</h3>" + _table(best, ["harness", "checkpoint", "evaluation", "score", "timr"]))
        out.append("<h3>Seed pairs</h3>" + _table(seed_pairs(a, *ts)))
        endpoints = [c for c in a.checkpoints() if c["kind"] == "endpoint"]
        if endpoints:
            out.append("<h3>Baselines</h3>" + _table(endpoints, ["id", "name", "path"]))
        out.append("<h2 id='co-lineage'>Co-lineage</h2>")
        out.append(fig(figures.co_lineage(views.co_lineage(a, *ts), "score")))
        out.append("<h2 id='heatmap'>Harness x checkpoint heatmap</h2>")
        out.append(fig(figures.heatmap(views.matrix(a, *ts), "timr")))
        out.append("<h2 id='trajectories'>Example trajectories</h2>")
        for title, ep in examples(a, *ts, best_eval):
            out.append(_episode_html(title, ep, a))
    body = "\n".join(out)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>CoEvo-RSI report</title>"
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


def write_report(a: Archive, out: Path) -> Path:
    """Write the report atomically (a half-written file never sits at `out`)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(build_report(a), encoding="utf-8")
    tmp.replace(out)
    return out
