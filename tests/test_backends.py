"""The CTranslate2 backend against the transformers backend on a random tiny checkpoint: same greedy
answers, a conversion made once and redone only when the weights change, k samples from one prefill."""
import json
import os

import pytest

from engine import ASSETS
from engine.harness.spec import HarnessSpec
from engine.models import BackendSpec, load_backend
from engine.models.ct2_backend import MIN_SHARED_PREFIX, STAMP, _batches, answer_start, cache_dir
from engine.rollout import build_messages, run_episodes, summarize
from engine.tasks import get_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tiny_checkpoint, home_data, tmp_path_factory):
    """A private copy of the random tiny checkpoint (the tests convert and touch it), a harness, a task."""
    import shutil
    path = tmp_path_factory.mktemp("backends") / "tiny"
    shutil.copytree(tiny_checkpoint, path)
    spec = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"max_new_tokens": 48})})
    return str(path), spec, get_task("smart_home", home_data)


def test_ctranslate2_float32_gives_the_transformers_greedy_answers(root):
    path, spec, task = root
    items = task.load("dev")
    results = {}
    for backend_spec in (BackendSpec(), BackendSpec(name="ctranslate2", compute_type="float32")):
        backend = load_backend(backend_spec, path)
        episodes = run_episodes(spec, task, backend, items)
        results[backend_spec.name] = ([e.turns[0].output for e in episodes],
                                      task.score(items, [e.prediction for e in episodes])[0],
                                      summarize(episodes)["timr"])
    hf, ct2 = results["transformers"], results["ctranslate2"]
    same = sum(a == b for a, b in zip(hf[0], ct2[0]))
    assert same >= 0.95 * len(items), f"{same}/{len(items)} identical greedy outputs"
    assert abs(hf[1] - ct2[1]) <= 0.05 and abs(hf[2] - ct2[2]) <= 0.05


def test_both_engines_rank_the_same_next_tokens(root):
    """What constrained decoding of a call name picks from: the most probable next tokens, in order."""
    path, spec, task = root
    prompts = [load_backend(BackendSpec(), path).chat_prompt(build_messages(spec, task, i))
               for i in task.load("dev")[:3]]
    ranked = {name: [load_backend(BackendSpec(name=name), path).next_tokens(p + '[{"name": "', n=8) for p in prompts]
              for name in ("transformers", "ctranslate2")}
    for hf, ct2 in zip(ranked["transformers"], ranked["ctranslate2"]):
        assert len(hf) == len(ct2) == 8 and hf[0] == ct2[0] and len(set(hf[:5]) & set(ct2[:5])) >= 4


def test_conversion_is_cached_and_redone_when_the_weights_change(root, tmp_path):
    import shutil
    path, spec, task = root
    copy = tmp_path / "ckpt"
    shutil.copytree(path, copy)
    load_backend(BackendSpec(name="ctranslate2"), copy)
    stamp = cache_dir(copy) / STAMP
    first = stamp.stat().st_mtime_ns
    load_backend(BackendSpec(name="ctranslate2", compute_type="int8"), copy)  # one conversion, any compute type
    assert stamp.stat().st_mtime_ns == first
    weights = copy / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    load_backend(BackendSpec(name="ctranslate2"), copy)
    assert stamp.stat().st_mtime_ns != first
    assert json.loads(stamp.read_text())["source"] == str(copy.resolve())


def test_k_samples_of_a_prompt_and_a_shared_prefix_keep_every_answer_in_place(root):
    path, spec, task = root
    backend = load_backend(BackendSpec(name="ctranslate2"), path)
    items = task.load("dev")[:6]
    prompts = [backend.chat_prompt(build_messages(spec, task, i)) for i in items]
    alone = [backend.generate([p])[0] for p in prompts]  # no grouping, no shared prefix
    together = backend.generate(prompts + prompts[:2])   # grouped by prefix; two prompts asked twice
    assert together[:6] == alone and together[6:] == alone[:2]
    backend.seed = 3
    sampled = backend.generate([prompts[0]] * 5, temperature=1.0)
    assert len(sampled) == 5 and all(n > 0 for _, n in sampled)
    assert len({t for t, _ in sampled}) > 1  # k hypotheses, not one answer copied k times


def test_a_begun_answer_goes_on_from_the_cached_chat_prompt_with_the_same_tokens(root):
    """Constrained decoding's resumptions and rankings run the chat prompt as a cached static prompt: the
    answers are the transformers backend's, and a cache too small for two chat prompts (emptied by reloading
    the model) gives the same answers and rankings as one that holds them all."""
    path, spec, task = root
    hf = load_backend(BackendSpec(), path)
    begun = [hf.chat_prompt(build_messages(spec, task, i)) + '[{"name": "' for i in task.load("dev")[:8]]
    expected = hf.generate(begun, max_new_tokens=24)
    roomy, tight = (load_backend(BackendSpec(name="ctranslate2"), path) for _ in range(2))
    tight.cache_tokens = 1
    runs = {}
    for name, backend in (("roomy", roomy), ("tight", tight)):
        runs[name] = [(backend.generate([p], max_new_tokens=24)[0], backend.next_tokens(p, n=4)) for p in begun]
        runs[name] += [(backend.generate([p], max_new_tokens=24)[0], backend.next_tokens(p, n=4)) for p in begun]
    assert runs["roomy"] == runs["tight"] and runs["roomy"][:8] == runs["roomy"][8:]
    same = sum(a == b for a, (b, _) in zip(expected, runs["roomy"]))
    assert same >= 7, f"{same}/8 answers as transformers gives them"
    assert len(roomy._cached) == 8 and len(tight._cached) == 1  # one state per chat prompt; the tight one kept the last


def test_the_answer_starts_after_the_last_generation_prompt():
    marker = ["<|im_start|>", "assistant", "\n"]
    turn = ["<|im_start|>", "user", "\n", "hi", "<|im_end|>"]
    assert answer_start(turn + marker + ["[", "{"], marker) == 8
    assert answer_start(turn + marker + ["a"] + turn + marker + ["b"], marker) == 17  # the current turn's answer
    assert answer_start(turn, marker) == 0 and answer_start(turn + marker, []) == 0


def test_batches_hold_similar_lengths_and_run_a_shared_prefix_once():
    home = [f"h{i}" for i in range(40)]
    encoded = {"a": home + ["x"] * 10, "b": home + ["y"] * 12, "c": home + ["z"] * 30,
               "d": ["q"] * 60, "e": home + ["w"] * 11}
    batches = list(_batches(list(encoded), encoded, batch_size=2, tolerance=4))
    assert sorted(p for _, b in batches for p in b) == sorted(encoded)  # every prompt once
    for static, batch in batches:
        assert len(batch) <= 2
        lengths = [len(encoded[p]) for p in batch]
        assert max(lengths) - min(lengths) <= 4
        assert all(encoded[p][:len(static)] == static and len(encoded[p]) > len(static) for p in batch)
    shared = {tuple(b): s for s, b in batches}
    assert shared[("a", "e")] == home  # 40 tokens in common: one static prompt
    assert all(s == [] for b, s in shared.items() if b != ("a", "e"))  # alone, or under MIN_SHARED_PREFIX
    assert MIN_SHARED_PREFIX <= 40


def test_transformers_dtype_is_chosen_recorded_and_checked(root, monkeypatch):
    path, spec, task = root
    items = task.load("dev")
    outputs = {}
    for dtype in ("float32", "bfloat16"):
        backend = load_backend(BackendSpec(dtype=dtype), path)
        assert backend.model.dtype == getattr(backend.torch, dtype) and backend.label == f"transformers:{dtype}"
        outputs[dtype] = [e.turns[0].output for e in run_episodes(spec, task, backend, items)]
    same = sum(a == b for a, b in zip(outputs["float32"], outputs["bfloat16"]))
    assert same >= 0.8 * len(items), f"{same}/{len(items)} bf16 greedy outputs equal the fp32 ones"
    # "auto" follows the CPU's bf16 units, and the label records what was computed
    import engine.models as models
    for has_units, want in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(models, "cpu_has_bf16_units", lambda: has_units)
        assert BackendSpec(dtype="auto").label() == f"transformers:{want}"
        assert models.resolve_dtype("auto", "cpu") == want
    assert models.resolve_dtype(None, "cpu") == "float32" and models.resolve_dtype("auto", "cuda") == "bfloat16"
    with pytest.raises(ValueError, match="backend.dtype"):
        BackendSpec(name="ctranslate2", dtype="bfloat16")


def test_a_gpu_worker_with_vllm_takes_vllm_without_the_transformers_dtype(monkeypatch):
    import sys
    import types

    import torch

    from engine.remote import gpu_backend
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    swapped = gpu_backend(BackendSpec(dtype="auto"))
    assert swapped.name == "vllm" and swapped.options() == {}
    assert gpu_backend(BackendSpec(name="ctranslate2", compute_type="int8")).name == "ctranslate2"


def test_both_engines_cut_an_answer_where_it_loops(root):
    """With `stop_loops` each greedy answer is the free answer up to the end of its first loop, the same on
    both engines, whether the engine stopped decoding there or the answer was cut after it."""
    from engine.models.loops import MIN_LOOP
    path, spec, task = root
    items = task.load("dev")[:16]
    cut = {}
    for name in ("transformers", "ctranslate2"):
        backend = load_backend(BackendSpec(name=name), path)
        prompts = [backend.chat_prompt(build_messages(spec, task, i)) for i in items]
        free = backend.generate(prompts, max_new_tokens=96)
        cut[name] = backend.generate(prompts, max_new_tokens=96, stop_loops=4)
        looped = 0
        for (text, n), (short, m) in zip(free, cut[name]):
            assert text.startswith(short) and m <= n
            looped += m < n
            if m < n:  # cut at the end of a loop, which covers at least MIN_LOOP tokens
                assert m >= MIN_LOOP and len(short) < len(text)
        assert looped, f"no answer of the random tiny model looped on {name}"
    same = sum(a == b for a, b in zip(cut["transformers"], cut["ctranslate2"]))
    assert same >= 0.9 * len(items), f"{same}/{len(items)} identical cut answers"
