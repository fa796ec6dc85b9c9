import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:  # the dashboard's app/ package is not installed, only engine/ is
    sys.path.insert(0, str(REPO))

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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, home_data):
    """A random-init tiny model (no training) whose tokenizer knows the smart-home prompts, built by the
    engine's own model builder: for tests that need weights but are not about SFT."""
    from engine import ASSETS
    from engine.harness.spec import HarnessSpec
    from engine.rollout import build_messages
    from engine.tasks.smart_home import SmartHomeTask
    from engine.testing.tiny import tiny_checkpoint as build
    task = SmartHomeTask(home_data)
    spec = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    texts = [m["content"] for item in task.load("train")[:100] for m in build_messages(spec, task, item)]
    return build(tmp_path_factory.mktemp("tiny") / "tiny-random", texts=texts)


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def coevo(*args, check=True, **kw):
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                          check=check, **kw)


def small_configs(root: Path, task: str = "smart_home", sizes=None) -> tuple[Path, Path]:
    """Init and round configs of a task scaled down for tests: little data, short training, small
    sampling and probing. Returns (init.yaml, run.yaml) in root."""
    from engine import ASSETS
    profile = yaml.safe_load((ASSETS / "train" / "cpu.yaml").read_text())
    profile.update(num_train_epochs=3)
    (root / "profile.yaml").write_text(yaml.safe_dump(profile))
    config = yaml.safe_load((ASSETS / "init" / f"{task}.yaml").read_text())
    config.update(sizes=sizes or {"train": 240, "dev": 24}, profile=str(root / "profile.yaml"))
    (root / "init.yaml").write_text(yaml.safe_dump(config))
    run = yaml.safe_load((ASSETS / "run" / f"{task}.yaml").read_text())
    run.update(sample={"k": 2, "temperature": 1.0, "tasks": 48, "min_kept": 4}, probe={"items": 8, "stage1": 4, "contenders": 2},
               profile=str(root / "profile.yaml"))
    (root / "run.yaml").write_text(yaml.safe_dump(run))
    return root / "init.yaml", root / "run.yaml"


@pytest.fixture(scope="session")
def small_default(tmp_path_factory):
    """`coevo run --rounds 0` on a small embedded default: two roots trained briefly with ms-swift,
    the seed matrix evaluated. Returns (archive path, stdout)."""
    root = tmp_path_factory.mktemp("default")
    init_yaml, _ = small_configs(root)
    archive = root / "archive.db"
    out = coevo("run", "--rounds", "0", "--archive", str(archive), "--config", str(init_yaml))
    return archive, out.stdout


def copy_default(small_default, dst_dir: Path) -> Path:
    """A private copy of the small default's archive (checkpoints are shared by absolute path)."""
    from engine.archive import Archive
    from engine.evolve.ablate import copy_archive
    with Archive(small_default[0]) as src:
        copy_archive(src, dst_dir / "archive.db").close()
    return dst_dir / "archive.db"


@pytest.fixture(scope="session")
def one_round(small_default, tmp_path_factory):
    """The small default after `coevo run --rounds 1` with the default settings (its inheritance probes
    stored). Tests that write take a copy (`copy_default(one_round, ...)`)."""
    path = copy_default(small_default, tmp_path_factory.mktemp("one-round"))
    root = Path(small_default[0]).parent
    out = coevo("run", "--rounds", "1", "--archive", str(path), "--config", str(root / "init.yaml"),
                "--run-config", str(root / "run.yaml"))
    return path, out.stdout
