"""Harness x checkpoint heatmaps of TIMR or score; a click on a cell opens its trajectories."""
import streamlit as st

from app import components, data, figures
from app.nav import page_file

st.title("Heatmaps")
data.require_archive()
c1, c2 = st.columns([2, 1])
with c1:
    ts = components.task_split_picker("heatmap-ts")
with c2:
    metric = components.metric_picker("heatmap-metric", first="timr")
if ts:
    m = data.matrix(*ts)
    st.caption(f"{len(m['harnesses'])} harnesses x {len(m['checkpoints'])} checkpoints, {len(m['cells'])} "
               "evaluated pairs (the newest evaluation of each). Click a cell for its trajectories.")
    # a fresh key after each click: the chart's selection must not re-fire when the page is revisited
    generation = st.session_state.setdefault("heatmap-generation", 0)
    picked = components.chart(figures.heatmap(m, metric), f"heatmap-{ts[0]}-{ts[1]}-{metric}",
                              key=f"heatmap-{generation}", select=True)
    if picked:
        st.session_state["heatmap-generation"] = generation + 1
        st.session_state["evaluation"] = int(picked[0])
        st.switch_page(page_file("trajectories"))
