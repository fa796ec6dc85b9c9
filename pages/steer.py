"""Steer the next round: enter a harness of your own, pin or exclude checkpoints, pause and resume.
Every act is a decision on the audit trail, with who and why; `coevo steer` / `coevo pause` do the same."""
import streamlit as st

from app import components, data
from engine.errors import CoevoError, InputError
from engine.evolve import steering

st.title("Steer")
data.require_archive()
if "steered" in st.session_state:
    st.success(st.session_state.pop("steered"))
tasks = data.tasks()
if not tasks:
    st.info("The archive has no harness yet: `coevo run` makes the seeds.")
    st.stop()
task = st.selectbox("Task", tasks, key="steer-task")
state = data.steering(task)
who = components.person()
why = st.text_input("Why (for the audit trail)", key="steer-why")


def act(fn, *args, **kw) -> None:
    """One steering act through the engine; its error is shown where the person acted."""
    try:
        with data.writable() as archive:
            d = fn(archive, *args, by=who, why=why or None, **kw)
        st.session_state["steered"] = f"Decision {d['id']}: {d['kind']} {d['choice'] or ''} by {d['decided_by']}"
        st.rerun()
    except InputError as e:
        st.error(str(e))
        return e
    except CoevoError as e:
        st.error(str(e))


# -- pause and resume -----------------------------------------------------------------------------
st.subheader("Run")
live = data.live()
if state["paused"]:
    p = state["paused"]
    st.warning(f"Paused by {p['decided_by']} at {p['decided_at'][:19]}" + (f": {p['comment']}" if p["comment"] else "")
               + ". Runs wait before their next step.")
    if st.button("Resume", type="primary", key="steer-resume"):
        act(steering.resume)
else:
    where = f"round {live['id']} is at {live['current']}" if live else "no round is open"
    st.write(f"Running freely ({where}).")
    if st.button("Pause at the next step boundary", key="steer-pause"):
        act(steering.pause)

# -- a harness of one's own ----------------------------------------------------------------------
st.subheader("Enter a harness for the next round")
if state["harness"]:
    st.info(f"Waiting for the next round: harness {state['harness']['choice']} entered by "
            f"{state['harness']['decided_by']}.")
harnesses = {h["id"]: f"{h['id']} · {h['name']}" for h in data.ids("harness")}
start = st.selectbox("Start from", list(harnesses), index=len(harnesses) - 1, key="steer-from",
                     format_func=harnesses.get)
detail = data.harness_detail(start)
text = st.text_area("Harness YAML", value=detail["spec_yaml"], height=420, key=f"steer-yaml-{start}")
if st.button("Validate and enter as the next round's harness", type="primary", key="steer-submit"):
    error = act(steering.submit_harness, text, parent=start)
    if error is not None and error.line:
        lines = text.splitlines()
        lo = max(0, error.line - 3)
        st.code("\n".join(f"{'>' if i + 1 == error.line else ' '} {i + 1:>3} | {lines[i]}"
                          for i in range(lo, min(len(lines), error.line + 2))), language=None)

# -- inheritance ----------------------------------------------------------------------------------
st.subheader("Inheritance")
checkpoints = data.ids("checkpoint")
names = {c["id"]: f"{c['id']} · {c['name']}" for c in checkpoints}
if state["pin"]:
    st.info(f"Pinned for the next round: {names.get(state['pin']['choice'])} by {state['pin']['decided_by']}.")
if state["excluded"]:
    st.write("Excluded from inheritance: " + ", ".join(names.get(c, c) for c in state["excluded"]))
a, b = st.columns(2)
with a:
    pick = st.selectbox("Checkpoint", [c["id"] for c in checkpoints], index=len(checkpoints) - 1,
                        format_func=names.get, key="steer-ckpt")
with b:
    st.write("")
    c1, c2 = st.columns(2)
    if c1.button("Pin as the next inheritance", key="steer-pin"):
        act(steering.pin, pick)
    if pick in state["excluded"]:
        if c2.button("Include again", key="steer-include"):
            act(steering.include, pick)
    elif c2.button("Exclude from inheritance", key="steer-exclude"):
        act(steering.exclude, pick)
