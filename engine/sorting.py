"""Natural order for ids and paths: h2 before h10, Algorithm-Generated/2 before Algorithm-Generated/10."""
from __future__ import annotations

import re


def natural_key(s: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", s)]
