import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def archive(tmp_path):
    from engine.archive import Archive
    with Archive(tmp_path / "archive.db") as a:
        yield a


@pytest.fixture(scope="session")
def home_data(tmp_path_factory):
    """A small synthetic HomeBench-format data set with every category."""
    from engine.tasks.smart_home import SmartHomeTask
    d = tmp_path_factory.mktemp("homebench")
    SmartHomeTask.generate(d, seed=7, sizes={"train": 120, "dev": 40})
    return d


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path
