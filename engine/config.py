"""Loading pydantic configs from YAML with errors that name the file and the field."""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from engine.errors import InputError

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data, *, path=None, text: str | None = None) -> M:
    """The model from plain data; an InputError names the field, and its line when `text` is the YAML
    the data came from."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        line = yaml_line(text, err["loc"]) if text is not None else None
        raise InputError(err["msg"], path=path, line=line, field=field or None) from None


def yaml_line(text: str, loc: tuple) -> int | None:
    """The 1-based line of the deepest node of `loc` found in the YAML text (its parent's line when the
    field itself is missing)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def parse_yaml(model: type[M], text: str, *, path=None) -> M:
    """The model from YAML text; a syntax or validation error names the path and its line."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(e, 'problem', e)}", path=path,
                         line=mark.line + 1 if mark else None) from None
    return validate(model, data, path=path, text=text)


def load_yaml(model: type[M], path) -> M:
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    return parse_yaml(model, path.read_text(encoding="utf-8"), path=path)


def dump_yaml(model: BaseModel) -> str:
    return yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)
