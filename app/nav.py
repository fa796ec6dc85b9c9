"""The dashboard's pages. Paths are relative to app/main.py: the pages live in the top-level pages/
folder (a pages/ folder next to the entry script would switch Streamlit to auto-discovery)."""
from __future__ import annotations

PAGES = {  # key -> (file, title, icon)
    "overview": ("../pages/overview.py", "Overview", ":material/dashboard:"),
    "lineage": ("../pages/lineage.py", "Lineage", ":material/account_tree:"),
    "heatmaps": ("../pages/heatmaps.py", "Heatmaps", ":material/grid_on:"),
    "trajectories": ("../pages/trajectories.py", "Trajectories", ":material/timeline:"),
    "decisions": ("../pages/decisions.py", "Decisions", ":material/gavel:"),
    "steer": ("../pages/steer.py", "Steer", ":material/tune:"),
    "jobs": ("../pages/jobs.py", "Jobs", ":material/play_circle:"),
    "compare": ("../pages/compare.py", "Compare", ":material/compare_arrows:"),
}


def page_file(key: str) -> str:
    return PAGES[key][0]
