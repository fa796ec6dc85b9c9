"""Generated tokens per second of the rollout runtime on CTranslate2 (int8 and float32), on transformers in
bf16 and on transformers in fp32 (the reference), against bare batched `model.generate` and `swift infer`,
on the same prompts, in one run; with how often each greedy answer equals the fp32 transformers one, and
each backend's score and TIMR.

    .venv/bin/python bench/rollout.py [--archive archive.db] [--checkpoint root-json] [--n 200] [--batch-size 32]

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
from engine.harness.spec import HarnessSpec  # noqa: E402
from engine.init import init, load_init_config  # noqa: E402
from engine.models import BackendSpec, load_backend  # noqa: E402
from engine.rollout import build_messages, run_episodes, summarize  # noqa: E402
from engine.tasks import get_task  # noqa: E402
from engine.train.sft import config_model_type  # noqa: E402


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
        template = subprocess.run([sys.executable, "-c", "import sys; from engine.train.sft_worker import "
                                   "matching_template as m; print(m(sys.argv[1], sys.argv[2]))", model_dir,
                                   config_model_type(model_dir)], check=True, capture_output=True, text=True,
                                  cwd=Path(__file__).resolve().parents[1]).stdout.split()[-1]
        cmd = [str(swift_bin), "infer", "--model", model_dir, "--model_type", config_model_type(model_dir),
               "--template", template, "--use_hf", "true", "--infer_backend", "transformers",
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


def timed_run(spec, task, backend, items):
    t0 = time.perf_counter()
    episodes = run_episodes(spec, task, backend, items)
    seconds = time.perf_counter() - t0
    score, _ = task.score(items, [e.prediction for e in episodes])
    return episodes, summarize(episodes), score, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", default="archive.db")
    ap.add_argument("--harness", default="smart_home-json")
    ap.add_argument("--checkpoint", default="root-json")
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--fast", nargs="+", default=["ctranslate2:int8", "ctranslate2:float32", "transformers:bfloat16"],
                    help="backends to compare with the fp32 transformers backend, as NAME:PRECISION")
    args = ap.parse_args()

    archive = Archive(args.archive)
    if not archive.checkpoints():
        init(archive, load_init_config())
    h, c = archive.harness(args.harness), archive.checkpoint(args.checkpoint)
    spec = HarnessSpec.from_dict(h["spec"])
    task = get_task(spec.task, task_dir(archive, spec.task))
    items = task.load(args.split, args.n)
    backend = load_backend(BackendSpec(dtype="float32"), c["path"], batch_size=args.batch_size)
    conversations = [build_messages(spec, task, i) for i in items]
    prompts = [backend.chat_prompt(m) for m in conversations]
    mnt = spec.sampling.max_new_tokens
    bare_generate(backend, prompts[:4], mnt, args.batch_size)  # warm-up

    fast = {}
    for label in args.fast:
        name, precision = label.split(":")
        option = "compute_type" if name == "ctranslate2" else "dtype"
        t0 = time.perf_counter()
        other = load_backend(BackendSpec(name=name, **{option: precision}), c["path"], batch_size=args.batch_size)
        load_s = time.perf_counter() - t0
        other.generate(prompts[:4], max_new_tokens=mnt)  # warm-up
        fast[label] = (*timed_run(spec, task, other, items), load_s)
        del other
    episodes, stats, score, runtime_s = timed_run(spec, task, backend, items)
    reference = [e.turns[0].output for e in episodes]
    t0 = time.perf_counter()
    bare_tokens = bare_generate(backend, prompts, mnt, args.batch_size)
    bare_s = time.perf_counter() - t0
    swift_stats, swift_cmd_s = swift_infer(c["path"], conversations, mnt, args.batch_size)
    swift_tokens, swift_s = swift_stats["num_generated_tokens"], swift_stats["runtime"]

    rt = stats["tokens"] / runtime_s
    bare = bare_tokens / bare_s
    sw = swift_tokens / swift_s
    print(f"{len(items)} episodes of {args.harness} x {args.checkpoint} ({c['path']}), batch {args.batch_size}, "
          f"torch threads {backend.torch.get_num_threads()}")
    print(f"  {'':<28}{'tokens':>7}{'seconds':>9}{'tok/s':>9}{'x transformers':>16}{'same greedy':>13}{'score':>7}{'TIMR':>7}")
    for label, (eps, st, sc, sec, load_s) in fast.items():
        same = sum(e.turns[0].output == r for e, r in zip(eps, reference))
        tps = st["tokens"] / sec
        print(f"  {label:<28}{st['tokens']:>7}{sec:>9.2f}{tps:>9.1f}{tps / rt:>16.2f}"
              f"{f'{same}/{len(items)}':>13}{sc:>7.3f}{st['timr']:>7.1%}   (load {load_s:.1f}s, a first conversion included)")
    print(f"  {'transformers:float32':<28}{stats['tokens']:>7}{runtime_s:>9.2f}{rt:>9.1f}{1:>16.2f}{'-':>13}"
          f"{score:>7.3f}{stats['timr']:>7.1%}")
    print(f"  {'bare model.generate':<28}{bare_tokens:>7}{bare_s:>9.2f}{bare:>9.1f}{bare / rt:>16.2f}")
    print(f"  {'swift infer (pt)':<28}{swift_tokens:>7}{swift_s:>9.2f}{sw:>9.1f}{sw / rt:>16.2f}"
          f"   (its own generation time; the whole command took {swift_cmd_s:.1f}s)")
    print(f"ratio transformers runtime / bare generate: {rt / bare:.2f}   (goal >= 0.8)")
    if fast:
        best = max(fast, key=lambda k: fast[k][1]["tokens"] / fast[k][3])
        print(f"ratio fastest ({best}) / transformers backend: "
              f"{fast[best][1]['tokens'] / fast[best][3] / rt:.2f}   (goal >= 4)")


if __name__ == "__main__":
    main()
