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
