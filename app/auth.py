"""The access token. `coevo dashboard` refuses to bind beyond loopback without one; when one is set,
every session must present it once (?token=... in the URL, or typed in)."""
from __future__ import annotations

import hmac
import os

import streamlit as st

TOKEN_ENV = "COEVO_DASHBOARD_TOKEN"


def require_token() -> None:
    token = os.environ.get(TOKEN_ENV)
    if not token or st.session_state.get("authorized"):
        return
    given = st.query_params.get("token") or st.text_input("Access token", type="password")
    if given and hmac.compare_digest(given.encode(), token.encode()):
        st.session_state["authorized"] = True
        return
    if given:
        st.error("Wrong token.")
    st.stop()
