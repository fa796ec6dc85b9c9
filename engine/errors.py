"""Errors that tell the user where bad input is: the file, and the line or field."""
from __future__ import annotations


class CoevoError(Exception):
    """Base class for errors shown to the user without a traceback."""


class InputError(CoevoError):
    """Bad input, located by file and line or field."""

    def __init__(self, message: str, *, path=None, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field = path, line, field
        where = str(path) if path is not None else ""
        if line is not None:
            where += f":{line}"
        if field:
            where += f" [{field}]" if where else f"[{field}]"
        super().__init__(f"{where}: {message}" if where else message)
