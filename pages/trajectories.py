"""One evaluation's episodes, turn by turn, with mismatched turns marked."""
import json

import streamlit as st

from app import components, data

st.title("Trajectories")
data.require_archive()

# the evaluation comes from a heatmap click, the URL (?evaluation=ID), or the pickers below
if "evaluation" in st.query_params and "evaluation" not in st.session_state:
    st.session_state["evaluation"] = int(st.query_params["evaluation"])
with st.expander("Choose an evaluation"):
    ts = components.task_split_picker("traj-ts")
    if ts:
        rows = data.evaluations_of(*ts)
        harnesses = sorted({r["harness"] for r in rows})
        h = st.selectbox("Harness", harnesses, key="traj-h")
        checkpoints = sorted({r["checkpoint"] for r in rows if r["harness"] == h})
        c = st.selectbox("Checkpoint", checkpoints, key="traj-c")
        evs = data.evaluations_of(*ts, h, c)
        e = st.selectbox("Evaluation", [r["id"] for r in evs], key="traj-e",
                         format_func=lambda i: next(f"#{r['id']} · score {r['score']:.3f} · TIMR {r['timr']:.1%} · "
                                                    f"{r['created_at'][:19]}" for r in evs if r["id"] == i))
        if st.button("Open", key="traj-open") and e is not None:
            st.session_state["evaluation"] = e

eid = st.session_state.get("evaluation") or data.newest_evaluation()  # the newest until one is chosen
if eid is None:
    st.info("No evaluation in the archive yet.")
    st.stop()
st.query_params["evaluation"] = str(eid)
ev = data.evaluation(eid)
st.subheader(f"Evaluation {ev['id']}: {ev['harness_id']} {ev['harness_name']} x {ev['checkpoint_id']} "
             f"{ev['checkpoint_name']}")
cols = st.columns(6)
cols[0].metric("Task / split", f"{ev['task']} / {ev['split']}")
cols[1].metric("Score", components.num(ev["score"]))
cols[2].metric("TIMR", components.pct(ev["timr"]), help=f"{ev['mismatched_turns']} of {ev['turns']} turns" + (
    f"; constrained decoding mended {ev['constrained_turns']} turn(s)" if ev.get("constrained_turns") else ""))
cols[3].metric("Episodes", ev["episodes"])
cols[4].metric("Round", ev["round"] or "-")
cols[5].metric("Top answer", components.pct(ev["top_answer_share"]),
               help=f"the most frequent prediction, {ev['top_answer']!r}: near 100 % means one answer to everything")
with st.expander("Task metrics", expanded=True):
    st.dataframe(components.flat_metrics(ev["metrics"]), hide_index=True)

f1, f2 = st.columns(2)
success = f1.radio("Outcome", ["all", "success", "failure"], horizontal=True, key="traj-success")
mismatch = f2.radio("Mismatch", ["all", "with a mismatched turn", "no mismatch"], horizontal=True, key="traj-mismatch")
eps = data.episodes(eid, {"all": None, "success": True, "failure": False}[success],
                    {"all": None, "with a mismatched turn": True, "no mismatch": False}[mismatch])
st.caption(f"{len(eps)} episodes")
if not eps:
    st.stop()
table = st.dataframe(eps, hide_index=True, on_select="rerun", selection_mode="single-row", key="traj-episodes",
                     column_config={"success": st.column_config.CheckboxColumn(), "prediction": st.column_config.TextColumn(width="large")})
rows = table.selection.rows if table else []
idx = eps[rows[0]]["idx"] if rows else eps[0]["idx"]

ep = data.episode(eid, idx)
st.subheader(f"Episode {ep['idx']} · item {ep['item_id']} · sample {ep['sample']} · "
             f"{'success' if ep['success'] else 'failure'} · reward {ep['reward']:.2f}")
if ep["input"]:
    st.write(f"**Input:** {ep['input']}")
for t in ep["turns"]:
    with st.container(border=True):
        mark = ":red-background[**MISMATCH**]" if t["mismatch"] else ":green-background[parsed]"
        chosen = f" · {t['constrained']} mend(s) by constrained decoding" if t.get("constrained") else ""
        st.markdown(f"**Turn {t['turn']}** · {mark} · reward {t['reward']:.2f} · {t['tokens']} tokens{chosen}")
        with st.expander("Prompt as the model saw it"):
            st.code(t["prompt"], language=None, wrap_lines=True)
        st.write("Raw output" if not t.get("free_output") else "Output, mended by constrained decoding")
        st.code(t["output"], language=None, wrap_lines=True)
        if t.get("free_output"):
            with st.expander("What the model wrote before constrained decoding"):
                st.code(t["free_output"], language=None, wrap_lines=True)
        if t["mismatch"]:
            st.markdown(f":red[**Parse error:**] {t['parse_error']}")  # the turn's content, not a page error
        else:
            st.write("Parsed action")
            st.json(json.loads(t["action"]) if t["action"] else None, expanded=True)
        st.write(f"**Environment feedback:** {t['feedback'] or '-'}")
