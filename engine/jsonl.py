"""JSONL reading and writing with errors that name the file and line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from engine.errors import InputError


def read_jsonl(path) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line number, object) for each non-blank line."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", path=path, line=lineno) from None
            if not isinstance(obj, dict):
                raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=lineno)
            yield lineno, obj


def require(obj: dict, field: str, typ, *, path, line):
    if field not in obj:
        raise InputError("missing field", path=path, line=line, field=field)
    value = obj[field]
    if not isinstance(value, typ):
        names = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise InputError(f"expected {names}, got {type(value).__name__}", path=path, line=line, field=field)
    return value


def write_jsonl(path, rows: Iterable[dict]) -> int:
    """Write atomically: a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n
