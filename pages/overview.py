"""The run at a glance."""
import streamlit as st

from app import components, data
from engine import figures
from app.nav import page_file

st.title("Overview")
data.require_archive()
ov = data.overview()
rendered_at = data.version()


@st.fragment(run_every=2)
def follow() -> None:
    """Rerun the page only when the archive's version counter moved (a step finished, a row was written)."""
    if data.version() != rendered_at:
        st.rerun()


follow()
live = ov["live"]
if live:
    with st.container(border=True):
        steps = " → ".join(f"**{s['step']}**" if s["step"] == live["current"] else
                           (f"~~{s['step']}~~" if s["done"] else s["step"]) for s in live["steps"])
        st.markdown(f"#### Round {live['id']} ({live['mode']}) is running: {steps}")
        job = live["job"]
        text = f"{live['done']}/{live['total']} steps" + (f" · job #{job['id']}: {job['message']}" if job else "")
        st.progress(live["done"] / live["total"], text=text)
        if live["paused"]:
            p = live["paused"]
            st.warning(f"Paused by {p['decided_by']}" + (f": {p['comment']}" if p["comment"] else "")
                       + " — it waits before its next step (Steer page or `coevo resume`).")
t = ov["totals"]
st.download_button("Download the report (one HTML file, works offline)", data=data.report_html,
                   file_name="coevo-report.html", mime="text/html", on_click="ignore", key="report",
                   icon=":material/summarize:")
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

if ov["baselines"]:
    st.subheader("Against served models")
    st.caption("`coevo baselines`: each served model under the seed harnesses (its best), beside the co-evolved "
               "pairs evaluated on the same split.")
    st.dataframe(ov["baselines"], hide_index=True, column_config={
        "score": st.column_config.NumberColumn(format="%.3f"), "timr": st.column_config.NumberColumn("TIMR", format="percent")})

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
