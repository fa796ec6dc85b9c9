"""The dashboard's entry: `coevo dashboard` runs `streamlit run app/main.py`."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the pages import app.* and engine.*
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import auth, data  # noqa: E402
from app.nav import PAGES  # noqa: E402

st.set_page_config(page_title="CoEvo-RSI", page_icon=":material/hub:", layout="wide")
auth.require_token()
page = st.navigation([st.Page(f, title=t, icon=i, default=(k == "overview")) for k, (f, t, i) in PAGES.items()])
with st.sidebar:
    st.caption(f"Archive: `{data.archive_path()}`")
page.run()
