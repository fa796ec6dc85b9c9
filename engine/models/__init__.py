"""The model backend registry: how a checkpoint directory turns prompts into outputs.

A backend is named with its options by a `BackendSpec`, which every evaluation and data set records,
so that a result is always reproduced with the engine that made it."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from engine.hardware import cpu_has_bf16_units
from engine.registry import Registry

BACKENDS: Registry = Registry("model backend")


class BackendSpec(BaseModel):
    name: str = "transformers"
    compute_type: Literal["float32", "int8", "int8_float32"] | None = None  # ctranslate2 only
    # transformers only: None is bf16 on a GPU and fp32 on a CPU; "auto" also takes bf16 on a CPU with bf16 units
    dtype: Literal["auto", "float32", "bfloat16"] | None = None
    # openai only: the served model's name and how to reach it (the key is read from the environment)
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0, le=20)

    def options(self) -> dict:
        if self.name == "openai":
            return {"model": self.model, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                    "timeout_s": self.timeout_s, "retries": self.retries}
        if self.dtype:
            return {"dtype": self.dtype}
        return {"compute_type": self.compute_type} if self.compute_type else {}

    def label(self) -> str:
        """What an evaluation records: the backend with the precision it actually computes in."""
        if self.name == "openai":
            return f"openai:{self.model}"
        if self.dtype:
            return f"{self.name}:{resolve_dtype(self.dtype)}"
        return f"{self.name}:{self.compute_type}" if self.compute_type else self.name

    @model_validator(mode="after")
    def _options_fit_backend(self):
        if self.dtype and self.name != "transformers":
            raise ValueError(f"backend.dtype is an option of the transformers backend, not of {self.name!r}")
        if self.compute_type and self.name != "ctranslate2":
            raise ValueError(f"backend.compute_type is an option of the ctranslate2 backend, not of {self.name!r}")
        return self


def resolve_dtype(dtype: str | None, device: str | None = None) -> str:
    """The torch dtype a transformers backend computes in on `device` (default: a GPU if visible)."""
    if dtype in ("float32", "bfloat16"):
        return dtype
    if device is None:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        return "bfloat16"
    return "bfloat16" if dtype == "auto" and cpu_has_bf16_units() else "float32"


def endpoint_spec(checkpoint: dict) -> BackendSpec:
    """The backend of an endpoint checkpoint (a served model, no weights): from its recipe."""
    r = checkpoint["recipe"]
    return BackendSpec(name="openai", model=r["model"], api_key_env=r.get("api_key_env", "OPENAI_API_KEY"),
                       concurrency=r.get("concurrency", 4), timeout_s=r.get("timeout_s", 60.0),
                       retries=r.get("retries", 3))


@BACKENDS.register("transformers")
def _transformers(model_dir, **kw):
    from engine.models.transformers_backend import TransformersBackend
    return TransformersBackend(model_dir, **kw)


@BACKENDS.register("ctranslate2")
def _ctranslate2(model_dir, **kw):
    from engine.models.ct2_backend import CTranslate2Backend
    return CTranslate2Backend(model_dir, **kw)


@BACKENDS.register("vllm")
def _vllm(model_dir, **kw):
    from engine.models.vllm_backend import VllmBackend
    return VllmBackend(model_dir, **kw)


@BACKENDS.register("openai")
def _openai(base_url, **kw):
    from engine.models.openai_backend import OpenAIBackend
    return OpenAIBackend(str(base_url), **kw)


def load_backend(spec: BackendSpec | str, model_dir, **kw):
    spec = BackendSpec(name=spec) if isinstance(spec, str) else spec
    return BACKENDS.get(spec.name)(model_dir, **spec.options(), **kw)
