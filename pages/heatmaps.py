"""Harness x checkpoint heatmaps of TIMR or score; a click on a cell opens its trajectories."""
import streamlit as st

from app import components, data
from app.nav import page_file
from engine import figures

st.title("Heatmaps")
data.require_archive()
c1, c2, c3 = st.columns([2, 1, 1])
with c1:
    ts = components.task_split_picker("heatmap-ts")
with c2:
    metric = components.metric_picker("heatmap-metric", first="timr")
with c3:
    order = st.radio("Order rows and columns by", ["lineage", "score"], horizontal=True, key="heatmap-order")
if ts:
    m = data.matrix(*ts)
    probes = sum(m["cells"]["probe"])
    st.caption(f"{len(m['harnesses'])} harnesses x {len(m['checkpoints'])} checkpoints: {m['size'] - probes} "
               f"pairs with a full evaluation (the newest), {probes} known only from an inheritance probe (small, "
               "outlined squares: a few items, not a score). `coevo matrix --fill` evaluates the top pairs in "
               "full. Hover for n and the kinds of mismatch; click a cell for its trajectories.")
    # a fresh key after each click: the chart's selection must not re-fire when the page is revisited
    generation = st.session_state.setdefault("heatmap-generation", 0)
    picked = components.chart(figures.heatmap(m, metric, order), f"heatmap-{ts[0]}-{ts[1]}-{metric}",
                              key=f"heatmap-{generation}", select=True)
    if picked:
        st.session_state["heatmap-generation"] = generation + 1
        st.session_state["evaluation"] = int(picked[0])
        st.switch_page(page_file("trajectories"))
