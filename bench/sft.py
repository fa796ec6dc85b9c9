"""ms-swift SFT throughput on the CPU: training examples per second and the loss curve of one data set
under several training settings, run one after the other in one run, as ratios to the first.

    .venv/bin/python bench/sft.py [--model DIR | --brain smollm2-135m] [--n 32] [--threads 2] [--only SETTING]

The data set is gold conversations of the synthetic smart-home task under its JSON seed harness.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import ASSETS  # noqa: E402
from engine.harness.spec import HarnessSpec  # noqa: E402
from engine.jsonl import write_jsonl  # noqa: E402
from engine.models.gguf import import_gguf  # noqa: E402
from engine.tasks import get_task  # noqa: E402
from engine.train.data import gold_conversations  # noqa: E402
from engine.errors import CoevoError  # noqa: E402
from engine.train.sft import SftJob, has_bf16_units, load_profile, run_sft  # noqa: E402

# Every setting is a change to one fixed base: the cpu-pretrained profile's learning rate and batch size, in
# fp32, with ms-swift's gradient checkpointing and shuffled padded batches (the SFT the brain started from).
# The base is pinned here, not read from the profile, so a row means the same whatever the profile becomes.
BASE = {"bf16_autocast": False, "gradient_checkpointing": True, "group_by_length": False, "optim": None}
SETTINGS = {  # name -> changes to BASE
    "fp32, batch 4": {},
    "bf16 autocast": {"bf16_autocast": True},  # measured only on a CPU with bf16 units (see main)
    "no grad checkpointing": {"gradient_checkpointing": False},
    "bf16, no grad checkpointing": {"bf16_autocast": True, "gradient_checkpointing": False},
    "batch 1 x 4 accumulated": {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 4},
    "batches by length": {"group_by_length": True},
    "bottom half frozen": {"freeze_parameters_ratio": 0.5},
    "packed sequences": {"packing": True},  # needs flash attention (see main)
    "bf16, no ckpt, fused AdamW": {"bf16_autocast": True, "gradient_checkpointing": False,
                                   "optim": "adamw_torch_fused"},
    "bf16, no ckpt, by length": {"bf16_autocast": True, "gradient_checkpointing": False,
                                 "group_by_length": True},  # the cpu-pretrained profile
}
BASELINE = "fp32, batch 4"


def refusal(log: str) -> str:
    """The error line of a failed SFT worker's log."""
    lines = [ln.strip() for ln in log.splitlines() if "Error" in ln]
    return lines[-1] if lines else log.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a Hugging Face model directory")
    ap.add_argument("--brain", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=32, help="training conversations")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=float, default=1)
    ap.add_argument("--heldout", type=int, default=32, help="held-out conversations whose loss each setting reports")
    ap.add_argument("--only", action="append", choices=list(SETTINGS), metavar="SETTING",
                    help=f"run only these settings (again for more), with {BASELINE!r} first as the ratios' base")
    args = ap.parse_args()
    names = [BASELINE] + [n for n in args.only if n != BASELINE] if args.only else list(SETTINGS)
    work = Path(tempfile.mkdtemp(prefix="coevo-bench-sft-"))
    model = args.model or str(import_gguf(args.brain, work / "model"))
    task = get_task("smart_home", work / "task")
    type(task).generate(work / "task", seed=0, sizes={"train": args.n, "dev": args.heldout, "test": 1})
    spec = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    data = work / "gold.jsonl"
    write_jsonl(data, gold_conversations(spec, task, task.load("train")))
    heldout = work / "heldout.jsonl"  # the same loss on conversations no setting trains on
    write_jsonl(heldout, gold_conversations(spec, task, task.load("dev")))
    base = load_profile("cpu-pretrained")
    rows = []
    for name in names:
        change = SETTINGS[name]
        profile = base.model_copy(update={**BASE, **change, "threads": args.threads, "num_train_epochs": args.epochs})
        if change.get("bf16_autocast") is True and not has_bf16_units(profile):
            # emulated bf16 ran many times slower than fp32 here (one step of 4 took minutes): not worth timing
            print(f"{name}: skipped, this CPU has no AVX-512-BF16 or AMX units")
            continue
        job = SftJob(model_dir=model, dataset=str(data), output_dir=str(work / name.replace(" ", "_")),
                     profile=profile, val_dataset=str(heldout))
        t0 = time.perf_counter()
        try:
            out = run_sft(job)
        except CoevoError as e:  # a setting ms-swift refuses here (packing without flash attention): say why
            print(f"{name}: refused by ms-swift: {refusal(str(e))}")
            continue
        seconds = time.perf_counter() - t0
        result = json.loads((out / "train_result.json").read_text())
        losses = [round(h["loss"], 3) for h in result["log_history"] if "loss" in h]
        losses += [round(h["train_loss"], 3) for h in result["log_history"] if "train_loss" in h]
        runtime = next((h["train_runtime"] for h in result["log_history"] if "train_runtime" in h), seconds)
        runtime -= sum(h.get("eval_runtime", 0) for h in result["log_history"])  # training steps only
        held = [h["eval_loss"] for h in result["log_history"] if "eval_loss" in h]
        rows.append((name, args.n * args.epochs / runtime, runtime, seconds, losses, held[-1] if held else None))
    first = rows[0][1]
    print(f"\n{args.n} conversations x {args.epochs} epoch(s), {args.threads} threads, model {model}")
    print(f"{'setting':<30}{'examples/s':>11}{'ratio':>7}{'train s':>9}{'whole s':>9}{'held-out':>10}"
          "  training loss every 10 steps, then the mean")
    for name, eps, runtime, seconds, losses, held in rows:
        held = f"{held:.3f}" if held is not None else "-"
        print(f"{name:<30}{eps:>11.3f}{eps / first:>7.2f}{runtime:>9.1f}{seconds:>9.1f}{held:>10}  {losses}")
    print(f"held-out: the loss on {args.heldout} gold conversations no setting trains on, after the last epoch")


if __name__ == "__main__":
    main()
