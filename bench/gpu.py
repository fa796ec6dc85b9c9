"""On a GPU node: one ms-swift SFT of the tiny model under the GPU profile (bf16, DeepSpeed ZeRO-3 under
torchrun on every visible GPU), then the trained checkpoint through the transformers backend in bf16 on
the GPU against fp32 on the CPU, side by side: greedy answers equal, score, TIMR, generated tokens/s
(timed after one untimed pass).

    python bench/gpu.py [--n 512] [--json]

Everything is built here (synthetic smart-home data, the random tiny model): nothing is downloaded.
The tiny model keeps its own learning rate and batch (it starts from random weights); the rest of the
profile is `assets/train/gpu.yaml`.
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
from engine.models import load_backend  # noqa: E402
from engine.rollout import build_messages, run_episodes, summarize  # noqa: E402
from engine.tasks import get_task  # noqa: E402
from engine.testing.tiny import tiny_checkpoint  # noqa: E402
from engine.train.data import gold_conversations  # noqa: E402
from engine.train.sft import SftJob, load_profile, run_sft  # noqa: E402


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512, help="training conversations")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu.py needs a CUDA GPU")
    work = Path(tempfile.mkdtemp(prefix="coevo-bench-gpu-"))
    task = get_task("smart_home", work / "task")
    type(task).generate(work / "task", seed=0, sizes={"train": args.n, "dev": 40, "test": 1})
    spec = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    train = task.load("train")
    texts = [m["content"] for item in train[:100] for m in build_messages(spec, task, item)]
    model = tiny_checkpoint(work / "tiny", texts=texts)
    data = work / "gold.jsonl"
    write_jsonl(data, gold_conversations(spec, task, train))

    gpus = torch.cuda.device_count()
    profile = load_profile("gpu").model_copy(update={
        "nproc_per_node": gpus, "learning_rate": 2e-3, "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1, "max_length": 768})
    t0 = time.perf_counter()
    trained = run_sft(SftJob(model_dir=str(model), dataset=str(data), output_dir=str(work / "sft"), profile=profile))
    sft_s = time.perf_counter() - t0
    result = json.loads((trained / "train_result.json").read_text())
    losses = [round(h["loss"], 3) for h in result["log_history"] if "loss" in h]
    runtime = next((h["train_runtime"] for h in result["log_history"] if "train_runtime" in h), sft_s)

    items = task.load("dev")
    runs = {}
    for device, dtype in (("cuda", "bfloat16"), ("cpu", "float32")):
        backend = load_backend("transformers", trained, device=device, dtype=dtype)
        run_episodes(spec, task, backend, items)  # warm-up: CUDA loads kernels and picks algorithms on first use
        t0 = time.perf_counter()
        episodes = run_episodes(spec, task, backend, items)
        seconds = time.perf_counter() - t0
        stats = summarize(episodes)
        runs[device] = {"dtype": dtype, "score": task.score(items, [e.prediction for e in episodes])[0],
                        "timr": stats["timr"], "tokens": stats["tokens"], "seconds": round(seconds, 2),
                        "outputs": [e.turns[0].output for e in episodes]}
    same = sum(a == b for a, b in zip(runs["cuda"].pop("outputs"), runs["cpu"].pop("outputs")))

    print(f"{torch.cuda.get_device_name(0)} x {gpus}, torch {torch.__version__}")
    print(f"SFT (gpu profile, DeepSpeed {profile.deepspeed}, {gpus} process(es)): {args.n} conversations x "
          f"{profile.num_train_epochs:g} epochs in {runtime:.1f}s of training ({sft_s:.1f}s in all), "
          f"{args.n * profile.num_train_epochs / runtime:.1f} examples/s; loss every 10 steps {losses}")
    for device, r in runs.items():
        print(f"  transformers on {device:<5}{r['dtype']:<9} score {r['score']:.3f}  TIMR {r['timr']:.1%}  "
              f"{r['tokens'] / r['seconds']:8.1f} tok/s")
    print(f"  greedy answers equal on {same}/{len(items)} dev items")
    if args.json:
        print(json.dumps({"gpu": torch.cuda.get_device_name(0), "gpus": gpus, "sft_s": round(sft_s, 1),
                          "train_runtime_s": runtime, "losses": losses, "runs": runs, "same_greedy": same,
                          "items": len(items)}))


if __name__ == "__main__":
    main()
