"""The co-lineage of (harness, checkpoint) pairs, round by round; and, as a second view, the harness DAG
and the checkpoint DAG side by side. A click on a pair opens its trajectories; on a tree node, its detail."""
import streamlit as st

from app import components, data
from app.nav import page_file
from engine import figures
from engine.views import neighbours

st.title("Lineage")
data.require_archive()
VIEWS = {"pairs": "Co-lineage of pairs", "trees": "Harness and checkpoint trees"}
c1, c2, c3 = st.columns([2, 1, 1])
with c1:
    ts = components.task_split_picker("lineage-ts")
with c2:
    metric = components.metric_picker("lineage-metric", first="score")
with c3:
    shown = st.radio("View", list(VIEWS), format_func=VIEWS.get, key="lineage-view")

if shown == "pairs":
    if not ts:
        st.stop()
    g = data.co_lineage(*ts)
    st.caption(f"{len(g['nodes'])} evaluated pairs, {len(g['edges'])} round moves. An arrow goes from the round's "
               "parent pair (the parent harness with the checkpoint of its best evaluation) to the pair the round "
               "made, labelled with the edit operator and the inheritance choice. Click a pair for its trajectories.")
    generation = st.session_state.setdefault("colineage-generation", 0)
    picked = components.chart(figures.co_lineage(g, metric), f"co-lineage-{ts[0]}-{ts[1]}",
                              key=f"colineage-{generation}", select=True)
    picked = [p for p in picked if p is not None]
    if picked:
        st.session_state["colineage-generation"] = generation + 1
        st.session_state["evaluation"] = int(picked[0])
        st.switch_page(page_file("trajectories"))
    st.stop()

hops = st.number_input("Neighbourhood (hops)", 1, 10, 2, key="lineage-hops")
task, split = ts or (None, None)
graph = data.lineage(task, split)
selected = st.session_state.get("lineage-node")  # (kind, id)
narrow = bool(selected) and st.toggle("Narrow to the selected node's neighbourhood", key="lineage-narrow")

left, right = st.columns(2)
for column, kind, title in ((left, "harness", "Harnesses"), (right, "checkpoint", "Checkpoints")):
    g = graph[kind + "es" if kind == "harness" else kind + "s"]
    if narrow and selected[0] == kind:
        g = neighbours(g, selected[1], hops)
    with column:
        st.caption(f"{title}: {len(g['nodes'])} nodes, {len(g['edges'])} edges"
                   + ("; dotted = a merge's base" if kind == "checkpoint" else ""))
        picked = components.chart(figures.lineage(g, metric, title, selected[1] if selected else None),
                                  f"lineage-{kind}s", key=f"lineage-{kind}", select=True)
        if picked and (kind, picked[0]) != selected:
            st.session_state["lineage-node"] = (kind, picked[0])
            st.rerun()

st.divider()
ids = {"harness": [n["id"] for n in graph["harnesses"]["nodes"]],
       "checkpoint": [n["id"] for n in graph["checkpoints"]["nodes"]]}
options = [("harness", i) for i in ids["harness"]] + [("checkpoint", i) for i in ids["checkpoint"]]
if options:
    index = options.index(selected) if selected in options else 0
    chosen = st.selectbox("Node", options, index=index, format_func=lambda o: f"{o[0]} {o[1]}", key="lineage-pick")
    if chosen != selected:
        st.session_state["lineage-node"] = chosen
        selected = chosen

if selected:
    kind, node = selected
    if kind == "harness":
        d = data.harness_detail(node)
        st.subheader(f"Harness {d['id']} · {d['name']}")
        st.write(f"{d['interface']} interface · made by {d['creator']} · round {d['round'] or '-'}")
        if d["rationale"]:
            st.caption(d["rationale"])
        st.write(f"Parents: {', '.join(d['parents']) or '-'} · Children: {', '.join(d['children']) or '-'}")
        a, b = st.columns(2)
        a.code(d["spec_yaml"], language="yaml")
        with b:
            st.write("Checkpoints trained or chosen under it")
            st.dataframe(d["checkpoints"], hide_index=True)
    else:
        d = data.checkpoint_detail(node)
        st.subheader(f"Checkpoint {d['id']} · {d['name']}")
        st.write(f"{d['kind']} · trained under {d['harness_id'] or '-'} · round {d['round'] or '-'}")
        st.write("Parents: " + (", ".join(f"{p['parent']} ({p['role']})" for p in d["parents"]) or "-")
                 + " · Children: " + (", ".join(f"{c['child']} ({c['role']})" for c in d["children"]) or "-"))
        a, b = st.columns(2)
        with a:
            st.code(d["recipe_yaml"] or "(no recipe)", language="yaml")
            if d["dataset"]:
                ds = d["dataset"]
                st.caption(f"Data set {ds['id']}: {ds['kept']} kept of {ds['samples']} samples "
                           f"({ds['source']}, acceptance {components.pct(ds['acceptance_rate'])})")
        with b:
            st.write("Harnesses it was trained or chosen under")
            st.dataframe(d["harnesses"], hide_index=True)
    st.write(f"Evaluations ({len(d['evaluations'])})")
    st.dataframe(d["evaluations"], hide_index=True, column_config={
        "score": st.column_config.NumberColumn(format="%.3f"), "timr": st.column_config.NumberColumn("TIMR", format="percent")})

with st.expander(f"Harness x checkpoint relation ({len(graph['relation'])})"):
    st.dataframe(graph["relation"], hide_index=True)
