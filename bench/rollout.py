"""Generated tokens per second of the harness runtime against bare batched `model.generate` and
against `swift infer` (transformers backend), on the same prompts, in one run.

    .venv/bin/python bench/rollout.py [--archive archive.db] [--n 200] [--batch-size 32]

Needs an archive with the embedded default (`coevo init`); builds it when missing.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.archive import Archive  # noqa: E402
from engine.evaluate import task_dir  # noqa: E402
from engine.harness.runtime import build_messages, run_episodes, summarize  # noqa: E402
from engine.harness.spec import HarnessSpec  # noqa: E402
from engine.init import init, load_init_config  # noqa: E402
from engine.models import load_backend  # noqa: E402
from engine.tasks import get_task  # noqa: E402


def bare_generate(backend, prompts: list[str], max_new_tokens: int, batch_size: int) -> int:
    """Plain transformers: left-padded batches in the given order, greedy; returns generated tokens."""
    torch, tok, model = backend.torch, backend.tokenizer, backend.model
    stop = sorted(backend.stop_ids)
    total = 0
    for i in range(0, len(prompts), batch_size):
        batch = tok(prompts[i:i + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                                 pad_token_id=tok.pad_token_id, temperature=None, top_p=None, top_k=None)
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            total += next((n + 1 for n, t in enumerate(row) if t in backend.stop_ids), len(row))
    return total


def swift_infer(model_dir: str, conversations: list[list[dict]], max_new_tokens: int,
                batch_size: int) -> tuple[dict, float]:
    """swift's own statistics (generated tokens and generation runtime) and the whole command's seconds."""
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "prompts.jsonl"
        data.write_text("".join(json.dumps({"messages": m}) + "\n" for m in conversations))
        result = Path(d) / "result.jsonl"
        swift_bin = Path(sys.executable).with_name("swift")
        cmd = [str(swift_bin), "infer", "--model", model_dir, "--model_type", "qwen3", "--template",
               "qwen3_nothinking", "--use_hf", "true", "--infer_backend", "transformers",
               "--val_dataset", str(data), "--dataset_shuffle", "false", "--max_new_tokens", str(max_new_tokens),
               "--temperature", "0", "--max_batch_size", str(batch_size), "--result_path", str(result)]
        env = dict(os.environ, MODELSCOPE_CACHE=str(Path(d) / "ms"), TOKENIZERS_PARALLELISM="false")
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, env=env, cwd=d, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        stats = next(ast.literal_eval(line[line.index("{"):]) for line in out.stdout.splitlines()
                     if "num_generated_tokens" in line)
        rows = [l for l in result.read_text().splitlines() if l.strip()]
        assert len(rows) == len(conversations), "swift infer answered a different number of prompts"
        return stats, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", default="archive.db")
    ap.add_argument("--harness", default="smart_home-json")
    ap.add_argument("--checkpoint", default="root-json")
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    archive = Archive(args.archive)
    if not archive.checkpoints():
        init(archive, load_init_config())
    h, c = archive.harness(args.harness), archive.checkpoint(args.checkpoint)
    spec = HarnessSpec.from_dict(h["spec"])
    task = get_task(spec.task, task_dir(archive, spec.task))
    items = task.load(args.split, args.n)
    backend = load_backend("transformers", c["path"], batch_size=args.batch_size)
    conversations = [build_messages(spec, task, i) for i in items]
    prompts = [backend.chat_prompt(m) for m in conversations]
    mnt = spec.sampling.max_new_tokens
    bare_generate(backend, prompts[:args.batch_size], mnt, args.batch_size)  # warm-up

    t0 = time.perf_counter()
    stats = summarize(run_episodes(spec, task, backend, items))
    runtime_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare_tokens = bare_generate(backend, prompts, mnt, args.batch_size)
    bare_s = time.perf_counter() - t0
    swift_stats, swift_cmd_s = swift_infer(c["path"], conversations, mnt, args.batch_size)
    swift_tokens, swift_s = swift_stats["num_generated_tokens"], swift_stats["runtime"]

    rt = stats["tokens"] / runtime_s
    bare = bare_tokens / bare_s
    sw = swift_tokens / swift_s
    print(f"{len(items)} episodes of {args.harness} x {args.checkpoint}, batch {args.batch_size}, "
          f"torch threads {backend.torch.get_num_threads()}")
    print(f"  harness runtime      {stats['tokens']:>7} tokens {runtime_s:7.2f}s {rt:9.1f} tok/s  (TIMR {stats['timr']:.1%})")
    print(f"  bare model.generate  {bare_tokens:>7} tokens {bare_s:7.2f}s {bare:9.1f} tok/s")
    print(f"  swift infer (pt)     {swift_tokens:>7} tokens {swift_s:7.2f}s {sw:9.1f} tok/s  "
          f"(its own generation time; the whole command took {swift_cmd_s:.1f}s)")
    print(f"ratio runtime / bare generate: {rt / bare:.2f}   (goal >= 0.8)")
    print(f"ratio runtime / swift infer:   {rt / sw:.2f}   (goal >= 1.5; swift's generation time, same batch size)")
    print(f"ratio runtime / swift infer:   {rt / (swift_tokens / swift_cmd_s):.2f}   (the whole `swift infer` command)")


if __name__ == "__main__":
    main()
