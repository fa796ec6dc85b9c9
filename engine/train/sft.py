"""Supervised fine-tuning through ms-swift, one job per worker process.

ms-swift sets environment variables, reseeds global RNGs and leaves threads behind, so each run gets a
fresh interpreter (`python -m engine.train.sft_worker JOB.json`). The checkpoint directory appears at its
final path only once complete (an atomic rename), so a killed run leaves nothing half-written behind.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from engine import ASSETS
from engine.config import load_yaml
from engine.errors import CoevoError
from engine.hardware import cpu_has_bf16_units


class TrainProfile(BaseModel):
    name: str
    tuner_type: str = "full"
    torch_dtype: str = "float32"
    learning_rate: float
    per_device_train_batch_size: int
    gradient_accumulation_steps: int = 1
    num_train_epochs: float = 1
    max_length: int = 2048
    warmup_ratio: float = 0.0
    lr_scheduler_type: str = "cosine"
    weight_decay: float = 0.0
    optim: str | None = None
    deepspeed: str | None = None
    nproc_per_node: int | None = None
    threads: int | None = None  # OMP threads per worker on the CPU
    # fp32 weights, bf16 matmuls. "auto": on where the hardware has bf16 units (a GPU, or a CPU with
    # AVX-512-BF16 or AMX); a CPU without them emulates bf16 many times slower than fp32
    bf16_autocast: bool | Literal["auto"] = False
    use_cpu: bool = False        # train on the CPU even where an accelerator is visible (bf16 on a CPU needs it)
    freeze_parameters_ratio: float = 0.0  # freeze this share of the parameters, from the bottom layers up
    group_by_length: bool = False  # batches of similar lengths: less padding
    # conversations packed into rows of max_length, no padding at all; ms-swift allows it only with a
    # flash-attention implementation (attn_impl), which exists for GPUs, not CPUs
    packing: bool = False
    attn_impl: str | None = None
    # recompute activations in the backward pass instead of keeping them (ms-swift's default): it saves
    # memory a large model needs on a GPU and costs a second forward pass that a small model on a CPU need not pay
    gradient_checkpointing: bool = True


def load_profile(name_or_path: str) -> TrainProfile:
    path = Path(name_or_path)
    if not path.suffix:
        path = ASSETS / "train" / f"{name_or_path}.yaml"
    return load_yaml(TrainProfile, path)


class SftJob(BaseModel):
    model_dir: str
    dataset: str
    output_dir: str
    profile: TrainProfile
    seed: int = 0
    model_type: str | None = None  # ms-swift's model type; None: the checkpoint config's `model_type`
    template: str | None = None    # ms-swift's template; None: the one that encodes like the tokenizer's own
    val_dataset: str | None = None  # conversations never trained on: their loss is logged after each epoch


def work_dir(job: SftJob) -> Path:
    """Where a job trains; renamed to `output_dir` once complete."""
    return Path(job.output_dir + ".partial").resolve()


def swift_arguments(job: SftJob) -> dict:
    """The keyword arguments of ms-swift's SftArguments for this job."""
    p = job.profile
    bf16 = p.torch_dtype == "bfloat16" or p.bf16_autocast is True or (p.bf16_autocast == "auto" and has_bf16_units(p))
    kw = dict(
        model=job.model_dir, model_type=job.model_type or config_model_type(job.model_dir), template=job.template,
        use_hf=True, check_model=False,
        dataset=[job.dataset], split_dataset_ratio=0.0, tuner_type=p.tuner_type, torch_dtype=p.torch_dtype,
        bf16=bf16, fp16=False, learning_rate=p.learning_rate,
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps, num_train_epochs=p.num_train_epochs,
        max_length=p.max_length, warmup_ratio=p.warmup_ratio, lr_scheduler_type=p.lr_scheduler_type,
        weight_decay=p.weight_decay, output_dir=str(work_dir(job) / "swift"), add_version=False,
        save_only_model=True, save_strategy="epoch", save_total_limit=1, report_to=["none"],
        dataloader_num_workers=0, dataset_num_proc=1, logging_steps=10, seed=job.seed, data_seed=job.seed,
        eval_strategy="no", gradient_checkpointing=p.gradient_checkpointing)
    if job.val_dataset:
        kw.update(val_dataset=[job.val_dataset], eval_strategy="epoch",
                  per_device_eval_batch_size=p.per_device_train_batch_size)
    if p.freeze_parameters_ratio:
        kw["freeze_parameters_ratio"] = p.freeze_parameters_ratio
    if p.group_by_length:
        kw["group_by_length"] = True
    if p.packing:
        kw["packing"] = True
    if p.attn_impl:
        kw["attn_impl"] = p.attn_impl
    if p.use_cpu:
        kw["use_cpu"] = True
    if p.optim:
        kw["optim"] = p.optim
    if p.deepspeed:
        kw["deepspeed"] = p.deepspeed
    return kw


def has_bf16_units(profile: TrainProfile) -> bool:
    """Whether training under this profile runs on hardware with bf16 units: any GPU it may use, or a
    CPU whose flags (Linux /proc/cpuinfo) show AVX-512-BF16 or AMX-BF16."""
    if not profile.use_cpu:
        return True  # the GPU profiles: every GPU they target computes in bf16
    return cpu_has_bf16_units()


def config_model_type(model_dir) -> str | None:
    """The checkpoint's own model_type, so ms-swift needs no name match; None (swift decides) for a
    directory this machine cannot read, such as a model path on a remote training node."""
    path = Path(model_dir) / "config.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())["model_type"]
    except (OSError, ValueError, KeyError):
        raise CoevoError(f"{path}: no model_type; set the SFT job's model_type") from None


def launch_command(job_file: Path, profile: TrainProfile) -> tuple[list[str], dict]:
    """The command and environment that run one SFT job: plain python, or torchrun for DeepSpeed."""
    env = dict(os.environ)
    env["MODELSCOPE_CACHE"] = str(job_file.parent / "modelscope")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if profile.threads:
        env["OMP_NUM_THREADS"] = str(profile.threads)
    if profile.nproc_per_node:
        env["NPROC_PER_NODE"] = str(profile.nproc_per_node)
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={profile.nproc_per_node}",
               "-m", "engine.train.sft_worker", str(job_file)]
    else:
        cmd = [sys.executable, "-m", "engine.train.sft_worker", str(job_file)]
    return cmd, env


def start_sft(job: SftJob) -> subprocess.Popen:
    """Start the worker; `finish_sft` waits for it and publishes the checkpoint."""
    work = work_dir(job)
    # leftovers of a killed run: the caller registers a checkpoint only with its step, so these are orphans
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(job.output_dir, ignore_errors=True)
    work.mkdir(parents=True)
    job_file = work / "job.json"
    job_file.write_text(job.model_dump_json(indent=2))
    cmd, env = launch_command(job_file, job.profile)
    log = open(work / "train.log", "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work,
                            preexec_fn=die_with_parent)


def die_with_parent() -> None:
    """Run in a worker before it starts: on Linux the kernel ends it (SIGTERM) when the run that started
    it dies, so that a killed run leaves no trainer writing into the folder its resumed run trains in."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def finish_sft(job: SftJob, proc: subprocess.Popen) -> Path:
    work = work_dir(job)
    rc = proc.wait()
    log = work / "train.log"
    result_file = work / "result.json"
    if rc != 0 or not result_file.exists():
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise CoevoError(f"SFT failed (exit {rc}); log {log}:\n{tail}")
    result = json.loads(result_file.read_text())
    ckpt = Path(result["last_model_checkpoint"])
    final = Path(job.output_dir)
    shutil.move(str(ckpt), str(work / "model"))
    (work / "model" / "train_result.json").write_text(json.dumps(result, indent=1))
    shutil.rmtree(work / "swift", ignore_errors=True)
    shutil.rmtree(work / "modelscope", ignore_errors=True)
    shutil.move(str(log), str(work / "model" / "train.log"))
    os.replace(work / "model", final)  # the checkpoint appears complete or not at all
    shutil.rmtree(work, ignore_errors=True)
    return final


def run_sft(job: SftJob) -> Path:
    return finish_sft(job, start_sft(job))
