"""Widgets the pages share."""
from __future__ import annotations

import os

import streamlit as st

from app import data
from engine import figures


def chart(fig, name: str, *, key: str | None = None, select: bool = False):
    """A plotly chart with its PNG camera button and a standalone-HTML download for slides.
    With `select`, returns the ids (customdata) of the selected points."""
    event = st.plotly_chart(fig, key=key, on_select="rerun" if select else "ignore",
                            selection_mode="points", config=figures.config(name))
    # the HTML embeds plotly.js (works offline); built only when the button is clicked
    st.download_button("Download HTML", data=lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                       file_name=f"{name}.html", mime="text/html", on_click="ignore", key=f"html-{key or name}")
    if not select or not event:
        return []
    points = event["selection"].get("points", [])  # the state is a dict (AppTest sets it as one)
    ids = [p.get("customdata") for p in points]  # a figure's customdata is one id per point, bare or in a list
    return [i[0] if isinstance(i, list) else i for i in ids if i is not None and i != [None]]


def task_split_picker(key: str) -> tuple[str, str] | None:
    """A (task, split) selector over the evaluated ones; None when nothing is evaluated yet."""
    options = [(r["task"], r["split"]) for r in data.task_splits()]
    if not options:
        st.info("No evaluation in the archive yet.")
        return None
    return st.selectbox("Task / split", options, format_func=lambda o: f"{o[0]} / {o[1]}", key=key)


def metric_picker(key: str, first: str) -> str:
    """Colour by score or by TIMR."""
    options = [first] + [m for m in ("score", "timr") if m != first]
    return st.radio("Colour", options, format_func={"score": "score", "timr": "TIMR"}.get, horizontal=True, key=key)


def person() -> str:
    """Who is deciding, for the audit trail."""
    return st.text_input("Your name (for the audit trail)", value=os.environ.get("USER", "person"), key="person")


def flat_metrics(metrics: dict, prefix: str = "") -> list[dict]:
    """A task's nested metrics as rows: {'metric': 'overall.success', 'value': 0.23}."""
    rows = []
    for k, v in metrics.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += flat_metrics(v, name + ".")
        elif not isinstance(v, list):
            rows.append({"metric": name, "value": f"{v:.4f}" if isinstance(v, float) else str(v)})
    return rows


def pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def num(value) -> str:
    return "-" if value is None else f"{value:.3f}"
