"""Loading pydantic configs from YAML with errors that name the file and the field."""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from engine.errors import InputError

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data, *, path=None) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InputError(err["msg"], path=path, field=field or None) from None


def load_yaml(model: type[M], path) -> M:
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(e, 'problem', e)}", path=path,
                         line=mark.line + 1 if mark else None) from None
    return validate(model, data, path=path)


def dump_yaml(model: BaseModel) -> str:
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)
