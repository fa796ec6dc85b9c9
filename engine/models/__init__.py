"""The model backend registry: how a checkpoint directory turns prompts into outputs."""
from engine.registry import Registry

BACKENDS: Registry = Registry("model backend")


@BACKENDS.register("transformers")
def _transformers(model_dir, **kw):
    from engine.models.transformers_backend import TransformersBackend
    return TransformersBackend(model_dir, **kw)


def load_backend(name: str, model_dir, **kw):
    return BACKENDS.get(name)(model_dir, **kw)
