"""TIES merging through mergekit, with the merged checkpoints' lowest common ancestor as the base."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def ties_config(models: list[str], base: str, *, density: float = 0.5, weights: list[float] | None = None) -> dict:
    weights = weights or [1.0 / len(models)] * len(models)
    return {
        "merge_method": "ties",
        "base_model": str(Path(base).resolve()),  # absolute: a relative path reads as a hub repo id
        "models": [{"model": str(Path(m).resolve()), "parameters": {"density": density, "weight": w}}
                   for m, w in zip(models, weights)],
        "parameters": {"normalize": True},
        "dtype": "float32",
    }


def run_ties(config: dict, out_dir) -> Path:
    """Merge into out_dir.partial, then rename: the directory is complete or absent."""
    from mergekit.config import MergeConfiguration
    from mergekit.merge import MergeOptions, run_merge

    out = Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    run_merge(MergeConfiguration.model_validate(config), str(tmp),
              MergeOptions(copy_tokenizer=True, quiet=True, device="cpu"))
    copy_generation_config(config["base_model"], tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def copy_generation_config(src, dst) -> None:
    """mergekit copies weights and tokenizer; the stop tokens live in generation_config.json."""
    src, dst = Path(src) / "generation_config.json", Path(dst) / "generation_config.json"
    if src.exists() and not dst.exists():
        shutil.copy(src, dst)
