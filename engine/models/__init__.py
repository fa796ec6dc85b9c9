"""The model backend registry: how a checkpoint directory turns prompts into outputs.

A backend is named with its options by a `BackendSpec`, which every evaluation and data set records,
so that a result is always reproduced with the engine that made it."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from engine.registry import Registry

BACKENDS: Registry = Registry("model backend")


class BackendSpec(BaseModel):
    name: str = "transformers"
    compute_type: Literal["float32", "int8", "int8_float32"] | None = None  # ctranslate2 only

    def options(self) -> dict:
        return {"compute_type": self.compute_type} if self.compute_type else {}

    def label(self) -> str:
        return f"{self.name}:{self.compute_type}" if self.compute_type else self.name


@BACKENDS.register("transformers")
def _transformers(model_dir, **kw):
    from engine.models.transformers_backend import TransformersBackend
    return TransformersBackend(model_dir, **kw)


@BACKENDS.register("ctranslate2")
def _ctranslate2(model_dir, **kw):
    from engine.models.ct2_backend import CTranslate2Backend
    return CTranslate2Backend(model_dir, **kw)


def load_backend(spec: BackendSpec | str, model_dir, **kw):
    spec = BackendSpec(name=spec) if isinstance(spec, str) else spec
    return BACKENDS.get(spec.name)(model_dir, **spec.options(), **kw)
