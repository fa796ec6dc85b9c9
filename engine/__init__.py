"""CoEvo-RSI engine: the archive, harnesses, tasks, models, training and the co-evolution loop."""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS = REPO_ROOT / "assets"
