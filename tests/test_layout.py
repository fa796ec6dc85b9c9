"""The layering rules: the engine never imports streamlit; the UI never imports the heavy ML stack."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_engine_never_imports_streamlit():
    offenders = [p for p in (REPO / "engine").rglob("*.py") if "streamlit" in imported_roots(p)]
    assert offenders == []


def test_ui_never_imports_torch_swift_or_mergekit():
    files = [*(REPO / "app").rglob("*.py"), *(REPO / "pages").rglob("*.py")]
    offenders = [p for p in files if imported_roots(p) & {"torch", "swift", "mergekit", "transformers", "deepspeed"}]
    assert offenders == []


# Floors of the engine, lowest first: a module may import from its own package and from lower floors only.
FLOORS = [
    {"errors", "sorting", "jsonl", "config", "registry", "hardware", "__init__"},  # ground: no engine imports but these
    {"archive", "harness", "models"},
    {"tasks", "run_config", "call_constraint"},
    {"rollout", "executors"},
    {"train"},
    {"checkpoints", "evaluate", "views", "figures", "dashboard"},
    {"evolve", "matrix", "report", "baselines"},
    {"init", "jobs"},
    {"cli", "testing", "remote"},
]


def engine_imports(path: Path) -> set[str]:
    """The engine modules or packages a file imports (engine.X of `from engine.X... import` and `import engine.X`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "engine":
                found.add(parts[1] if len(parts) > 1 else "__init__")
                if len(parts) == 1 and isinstance(node, ast.ImportFrom):  # from engine import ASSETS
                    found.add("__init__")
    return found


def floor_of(unit: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if unit in floor)


def engine_units() -> dict[str, list[Path]]:
    units: dict[str, list[Path]] = {}
    for p in (REPO / "engine").rglob("*.py"):
        rel = p.relative_to(REPO / "engine").parts
        units.setdefault(rel[0].removesuffix(".py"), []).append(p)
    return units


def test_every_engine_module_has_a_floor():
    assert [u for u in engine_units() if not any(u in f for f in FLOORS)] == []


def test_no_module_imports_from_a_higher_floor():
    offenders = []
    for unit, files in engine_units().items():
        for p in files:
            for dep in engine_imports(p) - {unit}:
                if floor_of(dep) >= floor_of(unit) and not (floor_of(dep) == 0 and floor_of(unit) == 0):
                    offenders.append(f"{p.relative_to(REPO)} imports engine.{dep}")
    assert offenders == []


def test_the_archive_imports_only_errors_and_ground_floor_helpers():
    for p in (REPO / "engine" / "archive").rglob("*.py"):
        assert engine_imports(p) - {"archive"} <= {"errors", "sorting"}, p


def test_ground_floor_helpers_import_no_other_engine_module():
    for unit in FLOORS[0] - {"__init__"}:
        assert engine_imports(REPO / "engine" / f"{unit}.py") <= {"errors"}, unit


def test_run_choices_are_declared_once(tmp_path, monkeypatch):
    """The CLI's choices, the round job's arguments and the Jobs page's options are the run config's."""
    from typing import get_args

    from engine.archive import Archive
    from engine.cli import build_parser
    from engine.evolve.acceptance import ACCEPTANCE
    from engine.evolve.editors import EDITORS, get_editor
    from engine.evolve.inheritance import POLICIES
    from engine.jobs.kinds import RoundArgs
    from engine.run_config import CHOICE_FIELDS, MODES, AcceptEdit, choices

    get_editor("offline")  # registers the editors
    assert set(choices("inheritance")) == set(POLICIES.names())
    assert set(choices("editor")) == set(EDITORS.names())
    assert set(choices("mode")) == set(MODES)
    assert set(get_args(AcceptEdit)) == {"always", *ACCEPTANCE.names()}  # `always` judges nothing

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    cli = {a.dest: list(a.choices) for a in run._actions if a.dest in CHOICE_FIELDS}
    job = {name: list(get_args(get_args(RoundArgs.model_fields[name].annotation)[0])) for name in CHOICE_FIELDS}

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from app.nav import PAGES
    Archive(tmp_path / "archive.db").close()
    st.cache_data.clear()
    monkeypatch.setenv("COEVO_ARCHIVE", str(tmp_path / "archive.db"))
    monkeypatch.delenv("COEVO_DASHBOARD_TOKEN", raising=False)
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page(PAGES["jobs"][0]).run()
    assert not at.exception, [e.value for e in at.exception]
    keys = {"mode": "job-mode", "gate": "job-gate", "inheritance": "job-inherit", "editor": "job-editor"}
    page = {name: list(at.selectbox(key=key).options) for name, key in keys.items()}
    for name in CHOICE_FIELDS:
        assert cli[name] == job[name] == page[name] == choices(name), name
