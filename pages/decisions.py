"""The meta-agent's pending decisions: approve or override them; the audit trail of the rest."""
import streamlit as st

from app import components, data
from engine.errors import CoevoError
from engine.evolve.decisions import approve, override

st.title("Decisions")
data.require_archive()
ds = data.decisions()
if "decided" in st.session_state:
    st.success(st.session_state.pop("decided"))

st.subheader(f"Pending ({len(ds['pending'])})")
if not ds["pending"]:
    st.info("Nothing waits for a person. `coevo run --gate require` stops at each decision.")
who = components.person() if ds["pending"] else None
for d in ds["pending"]:
    with st.container(border=True):
        st.markdown(f"#### Decision {d['id']} · round {d['round_id']} · {d['kind']}")
        st.write(f"Proposed: **{d['choice']}** — {d['rationale']}")
        st.dataframe(d["table"], hide_index=True)
        diff = d["harness_diff"]
        if diff:
            st.write(f"Harness {diff['child']} against its parent {diff['parent']}: {diff['rationale']}")
            st.code(diff["diff"] or "(no change)", language="diff")
        with st.form(f"decide-{d['id']}"):
            others = [c for c in d["candidates"] if c != d["choice"]]
            choice = st.selectbox("Override with", others, key=f"choice-{d['id']}") if others else None
            comment = st.text_input("Comment", key=f"comment-{d['id']}")
            a, b = st.columns(2)
            do_approve = a.form_submit_button(f"Approve {d['choice']}", type="primary")
            do_override = b.form_submit_button("Override", disabled=not others)
        if do_approve or do_override:
            try:  # the same engine calls as `coevo approve` / `coevo override`
                with data.writable() as archive:
                    if do_approve:
                        r = approve(archive, d["id"], by=who, comment=comment or None)
                    else:
                        r = override(archive, d["id"], choice, by=who, comment=comment or None)
                st.session_state["decided"] = f"Decision {r['id']} {r['status']} by {r['decided_by']}: {r['choice']}"
                st.rerun()
            except CoevoError as e:
                st.error(str(e))

st.subheader("Audit trail")
st.dataframe(ds["trail"], hide_index=True)
