"""The run at a glance."""
import streamlit as st

from app import components, data, figures
from app.nav import page_file

st.title("Overview")
data.require_archive()
ov = data.overview()
t = ov["totals"]
cols = st.columns(6)
cols[0].metric("Rounds done", sum(r["state"] == "done" for r in ov["rounds"]))
cols[1].metric("Harnesses", t["harnesses"])
cols[2].metric("Checkpoints", t["checkpoints"])
cols[3].metric("Evaluations", t["evaluations"])
cols[4].metric("Turns", f"{t['turns']:,}")
cols[5].metric("TIMR, all turns", components.pct(t["mismatched_turns"] / t["turns"] if t["turns"] else None))

st.subheader("Best (harness, checkpoint) pair so far")
if ov["best"]:
    st.dataframe(ov["best"], hide_index=True, column_config={
        "score": st.column_config.NumberColumn(format="%.3f"), "timr": st.column_config.NumberColumn("TIMR", format="percent")})
else:
    st.info("No evaluation yet.")

st.subheader("Rounds")
if ov["rounds"]:
    components.chart(figures.rounds(ov["rounds"]), "rounds", key="rounds-chart")
    st.dataframe([{k: r[k] for k in ("id", "mode", "state", "steps_done", "task", "harness", "checkpoint", "score",
                                     "timr", "finished_at")} for r in ov["rounds"]], hide_index=True,
                 column_config={"id": "round", "score": st.column_config.NumberColumn(format="%.3f"),
                                "timr": st.column_config.NumberColumn("TIMR", format="percent")})
else:
    st.info("No round yet: `coevo run` or the Jobs page starts one.")

left, right = st.columns(2)
with left:
    st.subheader(f"Pending decisions ({len(ov['pending'])})")
    for d in ov["pending"]:
        st.write(f"**#{d['id']}** round {d['round_id']} · {d['kind']}: proposes `{d['choice']}` "
                 f"among {', '.join(map(str, d['candidates']))}")
    if ov["pending"]:
        st.page_link(page_file("decisions"), label="Review them", icon=":material/gavel:")
with right:
    st.subheader(f"Running jobs ({len(ov['jobs'])})")
    for j in ov["jobs"]:
        done = f"{j['progress']:.0f}/{j['total']:.0f}" if j["total"] else ""
        st.write(f"**#{j['id']}** {j['kind']} · {j['state']} {done} {j['message']}")
    st.page_link(page_file("jobs"), label="Jobs", icon=":material/play_circle:")
