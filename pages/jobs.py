"""Start engine jobs (a round, an evaluation, an SFT, a merge), follow them live, cancel them.
Jobs run in worker processes: closing the browser stops nothing."""
import streamlit as st

from app import data
from engine import jobs
from engine.errors import CoevoError
from engine.run_config import choices
from engine.tasks import task_names

st.title("Jobs")
data.require_archive()
if "started" in st.session_state:
    st.success(st.session_state.pop("started"))

KINDS = {"round": "Rounds of co-evolution", "eval": "Evaluation of a (harness, checkpoint) pair",
         "sft": "SFT of a checkpoint on a data set", "merge": "TIES merge of checkpoints",
         "matrix": "Fill the heatmap: the top harnesses x top checkpoints in full"}
kind = st.selectbox("Start a job", list(KINDS), format_func=lambda k: f"{k}: {KINDS[k]}", key="job-kind")
harnesses = [h["id"] for h in data.ids("harness")]
# the form starts on a task the archive holds: the most evaluated one, else one it has harnesses of
held = [t for t in [r["task"] for r in data.task_splits()] + data.tasks() if t in task_names()]
task_index = task_names().index(held[0]) if held else 0
checkpoints = [c["id"] for c in data.ids("checkpoint")]
with st.form(f"job-form-{kind}"):
    if kind == "round":
        a, b, c = st.columns(3)
        args = {"task": c.selectbox("Task", task_names(), index=task_index, key="job-round-task"),
                "rounds": a.number_input("Rounds", 1, 100, 1, key="job-rounds"),
                "gate": b.selectbox("Approval gate", choices("gate"), key="job-gate"),
                "mode": c.selectbox("Mode", choices("mode"), key="job-mode"),
                "inheritance": a.selectbox("Inheritance", choices("inheritance"), key="job-inherit"),
                "editor": b.selectbox("Editor", choices("editor"), key="job-editor")}
    elif kind == "eval":
        splits = data.task_splits()
        a, b = st.columns(2)
        args = {"harness": a.selectbox("Harness", harnesses, key="job-harness"),
                "checkpoint": b.selectbox("Checkpoint", checkpoints, key="job-checkpoint"),
                "task": a.selectbox("Task", task_names(), key="job-task",
                                    index=task_names().index(splits[0]["task"]) if splits else task_index),
                "split": b.text_input("Split", "dev", key="job-split"),
                "limit": a.number_input("Items (0 = all)", 0, 100_000, 0, key="job-limit") or None}
    elif kind == "sft":
        datasets = [d["id"] for d in data.datasets()]
        a, b, c = st.columns(3)
        args = {"checkpoint": a.selectbox("Start from checkpoint", checkpoints, key="job-sft-ckpt"),
                "harness": b.selectbox("Under harness", harnesses, key="job-sft-harness"),
                "dataset": c.selectbox("Data set", datasets, key="job-sft-data"),
                "profile": a.text_input("Training profile (empty = the run's)", key="job-sft-profile") or None}
    elif kind == "matrix":
        a, b, c = st.columns(3)
        args = {"task": a.selectbox("Task", task_names(), index=task_index, key="job-matrix-task"),
                "split": b.text_input("Split", "dev", key="job-matrix-split"),
                "top": c.number_input("Top K harnesses and checkpoints", 1, 100, 4, key="job-matrix-top")}
    else:
        args = {"models": st.multiselect("Models", checkpoints, key="job-merge-models"),
                "base": st.selectbox("Base", [None] + checkpoints, key="job-merge-base",
                                     format_func=lambda c: c or "their lowest common ancestor"),
                "density": st.slider("Density", 0.05, 1.0, 0.5, key="job-merge-density")}
    submitted = st.form_submit_button("Start", type="primary")
if submitted:
    try:
        job_id = jobs.submit(data.archive_path(), kind, args)
        st.session_state["started"] = f"Job {job_id} started: {kind}"
        st.rerun()
    except CoevoError as e:
        st.error(str(e))


@st.fragment(run_every=1)
def live():
    rows = data.jobs()
    active = [j for j in rows if j["state"] in ("queued", "running")]
    st.subheader(f"Running ({len(active)})")
    for j in active:
        with st.container(border=True):
            total = j["total"] or 0
            st.progress(min(1.0, j["progress"] / total) if total else 0.0,
                        text=f"#{j['id']} {j['kind']} · {j['state']} · {j['message'] or ''}")
            if st.button("Cancel", key=f"cancel-{j['id']}"):
                jobs.cancel(data.archive_path(), j["id"])
                st.rerun()
    st.subheader("All jobs")
    st.dataframe([{**{k: j[k] for k in ("id", "kind", "state", "progress", "total", "message", "error", "created_at",
                                        "finished_at")}, "executor": j["args"].get("executor") or "local"}
                  for j in rows], hide_index=True)
    if rows:
        pick = st.selectbox("Log of job", [j["id"] for j in rows], key="job-log")
        job = next(j for j in rows if j["id"] == pick)
        if job["result"]:
            st.json(job["result"])
        st.code(jobs.log_tail(job) or "(no output yet)", language=None)


live()
