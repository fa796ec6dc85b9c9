"""Two harnesses or two checkpoints side by side."""
import streamlit as st

from app import components, data
from engine import figures

st.title("Compare")
data.require_archive()
kind = st.radio("Compare", ["harness", "checkpoint"], horizontal=True, key="compare-kind",
                format_func=lambda k: k + "es" if k == "harness" else k + "s")
options = data.ids(kind)
if len(options) < 2:
    st.info(f"The archive has fewer than two {kind}s.")
    st.stop()
ids = [o["id"] for o in options]
names = {o["id"]: f"{o['id']} · {o['name']}" for o in options}
a, b = st.columns(2)
left = a.selectbox("Left", ids, index=0, format_func=names.get, key=f"compare-left-{kind}")
right = b.selectbox("Right", ids, index=1, format_func=names.get, key=f"compare-right-{kind}")
c = data.compare(kind, left, right)

st.subheader("Spec diff" if kind == "harness" else "Recipe diff")
st.code(c["diff"] or "(identical)", language="diff")
st.subheader("Scores and TIMR by task")
if c["by_task"]:
    components.chart(figures.compare_bars(c["by_task"], left, right), f"compare-{left}-{right}", key="compare-chart")
    st.dataframe(c["by_task"], hide_index=True, column_config={
        **{k: st.column_config.NumberColumn(format="%.3f") for k in ("best_score", "mean_score")},
        **{k: st.column_config.NumberColumn(format="percent") for k in ("mean_timr", "min_timr")}})
else:
    st.info("Neither side has an evaluation.")
other = "checkpoint" if kind == "harness" else "harness"
st.subheader(f"Under the same {other}")
st.caption(f"The newest evaluation of each side paired with the same {other}, task and split.")
st.dataframe(c["paired"], hide_index=True, column_config={
    "shared": other, **{k: st.column_config.NumberColumn(format="%.3f") for k in ("left_score", "right_score")},
    **{k: st.column_config.NumberColumn(format="percent") for k in ("left_timr", "right_timr")}})
