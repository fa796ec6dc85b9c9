"""Plotly figures of the archive. Ids travel in `customdata`, so a click on a point names what it is."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

# score: higher is better; TIMR: lower is better, so its scale runs green -> red
SCALES = {"score": ("Viridis", "score"), "timr": ("RdYlGn_r", "TIMR")}
UNEVALUATED = "#b8b8b8"
SYMBOLS = {"base": "diamond", "sft": "circle", "merge": "star", "json": "circle", "xml": "square",
           "tool_call": "triangle-up"}


def config(name: str) -> dict:
    """The chart's toolbar: the camera button saves a PNG sized for a slide."""
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2, "width": 1600, "height": 900}}


def lineage(graph: dict, metric: str, title: str, selected: str | None = None) -> go.Figure:
    """A layered DAG: roots on top, one row per generation; merges show every parent edge."""
    nodes = graph["nodes"]
    pos = {n["id"]: (n["x"], n["y"]) for n in nodes}
    fig = go.Figure()
    for style, dash in (("solid", None), ("dashed", "dot")):
        xs, ys = [], []
        for e in graph["edges"]:
            if (e.get("role") == "base") != (style == "dashed"):
                continue  # a merge's base is drawn dotted, its models and sft starts solid
            if e["source"] in pos and e["target"] in pos:
                (x0, y0), (x1, y1) = pos[e["source"]], pos[e["target"]]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                     line=dict(width=1, color="#8a8a8a", dash=dash)))
    scale, label = SCALES[metric]
    evaluated = [n for n in nodes if n.get(metric) is not None]
    for group, color in ((evaluated, None), ([n for n in nodes if n.get(metric) is None], UNEVALUATED)):
        if not group:
            continue
        marker = dict(size=[18 if n["id"] == selected else 11 for n in group],
                      symbol=[SYMBOLS.get(n.get("kind") or n.get("interface"), "circle") for n in group],
                      line=dict(width=[3 if n["id"] == selected else 0.5 for n in group], color="#222"))
        if color:
            marker["color"] = color
        else:
            marker.update(color=[n[metric] for n in group], colorscale=scale, cmin=0, cmax=1,
                          colorbar=dict(title=label, thickness=12))
        fig.add_trace(go.Scatter(
            x=[n["x"] for n in group], y=[n["y"] for n in group], mode="markers+text" if len(nodes) <= 60 else "markers",
            text=[n["id"] for n in group], textposition="middle right", customdata=[[n["id"]] for n in group],
            marker=marker, showlegend=False, name="evaluated" if color is None else "not evaluated",
            hovertext=[_node_hover(n) for n in group], hoverinfo="text"))
    rows = len({round(n["y"], 6) for n in nodes}) or 1
    fig.update_layout(title=title, height=min(1600, max(360, 46 * rows + 120)), margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(visible=False), yaxis=dict(visible=False, autorange="reversed"),
                      clickmode="event+select")
    return fig


def _node_hover(n: dict) -> str:
    head = f"<b>{n['id']}</b> {n.get('name', '')}"
    kind = n.get("kind") or n.get("interface") or ""
    score = "-" if n.get("score") is None else f"{n['score']:.3f}"
    timr = "-" if n.get("timr") is None else f"{n['timr']:.1%}"
    extra = f"<br>trained under {n['harness_id']}" if n.get("harness_id") else ""
    return f"{head}<br>{kind} · round {n.get('round') or '-'}{extra}<br>best: score {score}, TIMR {timr}"


def heatmap(matrix: dict, metric: str, order: str = "lineage") -> go.Figure:
    """Harness rows x checkpoint columns, in lineage or score order. Cells are square markers rather than a
    heatmap trace, because plotly selects points of scatter traces only: a click on a cell names its
    evaluation. A probe cell (a few items, an inheritance probe) is a smaller, outlined square."""
    rows = matrix["orders"][order]["rows"]
    cols = matrix["orders"][order]["cols"]
    cell_px = max(3, min(40, 900 // max(len(cols), 1), 900 // max(len(rows), 1)))
    scale, label = SCALES[metric]
    fig = go.Figure()
    cells = matrix["cells"]
    probe = np.array(cells["probe"], dtype=bool)
    # cells sit at integer positions (typed arrays, cheap to validate and to send); the axes label them
    row_at, col_at = {h: i for i, h in enumerate(rows)}, {c: i for i, c in enumerate(cols)}
    xs = np.array([col_at[c] for c in cells["checkpoint"]], dtype=np.int32)
    ys = np.array([row_at[h] for h in cells["harness"]], dtype=np.int32)
    ids = np.array(cells["id"], dtype=np.int64)
    colour = np.array(cells[metric], dtype=float)
    text = np.array(_cell_texts(cells), dtype=object)
    for is_probe in (False, True):
        pick = probe == is_probe
        if not pick.any():
            continue
        trace = go.Scattergl if matrix["size"] > 2000 else go.Scatter
        fig.add_trace(trace(
            x=xs[pick], y=ys[pick], mode="markers", name="inheritance probe" if is_probe else "full evaluation",
            showlegend=True,
            # one id per point, 1-D: the click's selection event carries it as a plain number
            customdata=ids[pick],
            marker=dict(symbol="square", size=cell_px * (0.62 if is_probe else 0.92), color=colour[pick],
                        colorscale=scale, cmin=0, cmax=1, colorbar=dict(title=label, thickness=12) if not is_probe
                        else None, showscale=not is_probe, line=dict(width=1.5 if is_probe else 0, color="#222")),
            text=text[pick], hovertemplate="%{text}<br>evaluation %{customdata} (click for trajectories)<extra></extra>"))
    show_ticks = max(len(rows), len(cols)) <= 60
    fig.update_layout(
        title=f"{matrix['task']}/{matrix['split']}: {label} per harness (rows) x checkpoint (columns)",
        height=max(320, cell_px * len(rows) + 200), margin=dict(l=10, r=10, t=90, b=10), clickmode="event+select",
        legend=dict(orientation="h", yanchor="bottom", y=-0.08, x=0),
        xaxis=dict(range=[-0.5, len(cols) - 0.5], tickvals=list(range(len(cols))) if show_ticks else None,
                   ticktext=cols if show_ticks else None, showticklabels=show_ticks, title="checkpoint", side="top",
                   showgrid=False, zeroline=False),
        yaxis=dict(range=[len(rows) - 0.5, -0.5], tickvals=list(range(len(rows))) if show_ticks else None,
                   ticktext=rows if show_ticks else None, showticklabels=show_ticks, title="harness",
                   showgrid=False, zeroline=False),
        plot_bgcolor="#f4f4f4")
    return fig


def _cell_texts(cells: dict) -> list[str]:
    """Each cell's hover: pair, score, TIMR, n, mismatch kinds (short: tens of thousands are sent)."""
    return [f"{h} x {c}<br>score {s:.3f} · TIMR {t:.1%} · {'probe ' if p else ''}n={n}<br>mismatch: {k}"
            for h, c, s, t, n, k, p in zip(
                cells["harness"], cells["checkpoint"], cells["score"], cells["timr"], cells["n"], cells["kinds"],
                cells["probe"])]


def co_lineage(graph: dict, metric: str) -> go.Figure:
    """(harness, checkpoint) pairs by round (x) in harness lanes (y); an arrow is a round's move, labelled
    with its edit operator and inheritance choice. A click on a pair names its evaluation."""
    nodes = graph["nodes"]
    pos = {n["id"]: (n["x"], n["lane"]) for n in nodes}
    fig = go.Figure()
    xs, ys, mx, my, mt = [], [], [], [], []
    for e in graph["edges"]:
        (x0, y0), (x1, y1) = pos[e["source"]], pos[e["target"]]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mx.append((x0 + x1) / 2)
        my.append((y0 + y1) / 2)
        mt.append(f"{e['source']} → {e['target']}<br>{e['label']}")
    many = len(nodes) > 2000
    scatter = go.Scattergl if many else go.Scatter
    if xs:
        fig.add_trace(scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                              line=dict(width=1.2, color="#8a8a8a")))
        fig.add_trace(scatter(x=mx, y=my, mode="markers", hovertext=mt, hoverinfo="text", showlegend=False,
                              marker=dict(size=6, color="#8a8a8a", symbol="diamond")))
    notes = []  # arrows with their labels while they stay readable; set at once (add_annotation is slow)
    for e in graph["edges"] if len(graph["edges"]) <= 40 else []:
        (x0, y0), (x1, y1) = pos[e["source"]], pos[e["target"]]
        notes.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                          showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.2, arrowcolor="#666",
                          standoff=9, startstandoff=9))
        notes.append(dict(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=e["label"].split(": ", 1)[1], showarrow=False,
                          font=dict(size=10, color="#444"), yshift=10))
    scale, label = SCALES[metric]
    for group, color in (([n for n in nodes if n.get(metric) is not None], None),
                         ([n for n in nodes if n.get(metric) is None], UNEVALUATED)):
        if not group:
            continue
        marker = dict(size=14, line=dict(width=0.8, color="#222"))
        if color:
            marker["color"] = color
        else:
            marker.update(color=[n[metric] for n in group], colorscale=scale, cmin=0, cmax=1,
                          colorbar=dict(title=label, thickness=12))
        fig.add_trace(scatter(
            x=[n["x"] for n in group], y=[n["lane"] for n in group], showlegend=False,
            mode="markers+text" if len(nodes) <= 60 else "markers", text=[n["checkpoint"] for n in group],
            textposition="top center", customdata=[[n["evaluation"]] for n in group], marker=marker,
            hovertext=[_pair_hover(n) for n in group], hoverinfo="text"))
    lanes = sorted({(n["lane"], n["harness"], n["harness_name"]) for n in nodes})
    rounds = sorted({n["round"] for n in nodes})
    fig.update_layout(
        title=f"{graph['task']}/{graph['split']}: co-lineage of (harness, checkpoint) pairs", annotations=notes,
        height=min(1600, max(360, 60 * len(lanes) + 140)), margin=dict(l=10, r=10, t=50, b=10),
        clickmode="event+select",
        xaxis=dict(title="round (0: seeds)", tickmode="array", tickvals=rounds if len(rounds) <= 40 else None,
                   zeroline=False),
        yaxis=dict(autorange="reversed", zeroline=False, showgrid=False, tickmode="array",
                   tickvals=[lane for lane, _, _ in lanes] if len(lanes) <= 60 else None,
                   ticktext=[f"{h} {name}" for _, h, name in lanes] if len(lanes) <= 60 else None))
    return fig


def _pair_hover(n: dict) -> str:
    score = "-" if n.get("score") is None else f"{n['score']:.3f}"
    timr = "-" if n.get("timr") is None else f"{n['timr']:.1%}"
    tail = (f"<br>evaluation {n['evaluation']} (click for trajectories)" if n.get("evaluation")
            else "<br>no full evaluation")
    return (f"<b>{n['harness']}</b> {n['harness_name']} x <b>{n['checkpoint']}</b><br>round {n['round'] or 'seed'}"
            f" · score {score} · TIMR {timr}{tail}")


def rounds(rows: list[dict]) -> go.Figure:
    """Score and TIMR of each round's evaluation."""
    done = [r for r in rows if r.get("score") is not None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[r["id"] for r in done], y=[r["score"] for r in done], name="score",
                             mode="lines+markers", customdata=[[r["evaluation"]] for r in done]))
    fig.add_trace(go.Scatter(x=[r["id"] for r in done], y=[r["timr"] for r in done], name="TIMR",
                             mode="lines+markers", line=dict(dash="dash"), customdata=[[r["evaluation"]] for r in done]))
    fig.update_layout(title="Score and TIMR per round", height=340, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(title="round", dtick=1), yaxis=dict(range=[0, 1.02], tickformat=".0%"))
    return fig


def compare_bars(by_task: list[dict], left: str, right: str) -> go.Figure:
    """Best score and mean TIMR per task split, one bar per side."""
    fig = go.Figure()
    for side in (left, right):
        rows = [r for r in by_task if r["side"] == side]
        keys = [f"{r['task']}/{r['split']}" for r in rows]
        fig.add_trace(go.Bar(x=keys, y=[r["best_score"] for r in rows], name=f"{side} best score"))
        fig.add_trace(go.Bar(x=keys, y=[r["mean_timr"] for r in rows], name=f"{side} mean TIMR",
                             marker_pattern_shape="/"))
    fig.update_layout(barmode="group", height=340, margin=dict(l=10, r=10, t=40, b=10),
                      title=f"{left} vs {right}", yaxis=dict(range=[0, 1.02]))
    return fig
