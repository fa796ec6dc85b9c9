import http.server
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from engine import ASSETS
from engine.errors import CoevoError
from engine.evolve.curator import parent_weights, pick_parent
from engine.evolve.decisions import approve, override
from engine.evolve.editors import get_editor
from engine.evolve.editors.llm import EditorError, LlmConfig
from engine.evolve.editors.offline import OPERATORS, constrain_calls
from engine.harness.spec import HarnessSpec
from engine.train.sft import SftJob, launch_command, load_profile, run_sft, swift_arguments

SEED = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml").to_dict()


def _harness(archive, name, score, parents=()):
    hid = archive.add_harness({**SEED, "name": name}, creator="seed", parents=list(parents))
    cid = archive.find_checkpoint("c") or archive.add_checkpoint(name="c", path="/c", kind="base")
    archive.add_evaluation(dict(harness_id=hid, checkpoint_id=cid, task="smart_home", split="dev", score=score,
                                metrics={}, episodes=1, turns=1, mismatched_turns=0, timr=0.0, tokens=1, seconds=0),
                           [], [])
    return hid


def test_curator_weights_follow_the_rule(archive):
    a = _harness(archive, "a", 0.2)
    b = _harness(archive, "b", 0.6)
    c = _harness(archive, "c", 0.6, parents=[b])
    _harness(archive, "d", 0.0, parents=[b])
    w = parent_weights(archive, "smart_home", "dev", sharpness=10)
    median = 0.4  # of 0.2, 0.6, 0.6, 0.0
    assert w[a]["weight"] == pytest.approx(1 / (1 + math.exp(-10 * (0.2 - median))))
    assert w[b]["weight"] == pytest.approx(1 / (1 + math.exp(-10 * (0.6 - median))) / 3)  # two children
    assert w[c]["weight"] == pytest.approx(1 / (1 + math.exp(-10 * (0.6 - median))))
    picks = [pick_parent(w, random.Random(s)) for s in range(200)]
    assert picks == [pick_parent(w, random.Random(s)) for s in range(200)]  # seeded
    assert picks.count(c) > picks.count(b) > 0


@pytest.mark.parametrize("op", [o for o in OPERATORS if o.__name__ != "change_task_option"],
                         ids=lambda f: f.__name__)
def test_every_offline_operator_writes_a_valid_spec_with_a_rationale(op):
    successes = [{"input": "Turn on the light in the kitchen.",
                  "action": json.dumps([{"name": "kitchen.light.turn_on", "args": {}}])}]
    spec = json.loads(json.dumps(SEED))
    spec["few_shot"] = [{"input": "Open the blinds in the bathroom.",
                         "calls": [{"name": "bathroom.blinds.open", "args": {}}]}]
    edit = op(spec, random.Random(0), successes)
    assert edit is not None and edit.rationale
    new = HarnessSpec.from_dict(edit.spec).to_dict()
    assert new != HarnessSpec.from_dict(spec).to_dict()


def test_the_call_constraint_operator_only_turns_it_on():
    on = constrain_calls(json.loads(json.dumps(SEED)), random.Random(0), [])
    assert on.spec["sampling"]["constrain_calls"] is True and on.operator == "constrain_calls"
    assert constrain_calls(on.spec, random.Random(0), []) is None


def test_offline_editor_is_seeded():
    parent = {"spec": SEED}
    a = get_editor("offline")(parent, rng=random.Random(3), successes=[])
    b = get_editor("offline")(parent, rng=random.Random(3), successes=[])
    assert a.spec == b.spec and a.operator == b.operator


class _Endpoint(http.server.BaseHTTPRequestHandler):
    reply = ""
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Endpoint.seen.append((self.path, self.headers.get("Authorization"), body))
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": _Endpoint.reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


@pytest.fixture
def endpoint():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Endpoint.seen = []
    yield LlmConfig(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m", api_key="k")
    server.shutdown()


def test_llm_editor_valid_reply_becomes_a_spec_with_its_rationale(endpoint):
    new = {**SEED, "interface": {"name": "xml"}}
    _Endpoint.reply = "```yaml\n" + yaml.safe_dump({"rationale": "the model answers in XML", "spec": new}) + "```"
    failures = [{"output": "<calls>", "parse_error": "not valid JSON", "feedback": ""}]
    edit = get_editor("llm")({"spec": SEED}, scores={"score": 0.1, "timr": 0.9}, failures=failures, llm=endpoint)
    assert edit.spec["interface"] == {"name": "xml"} and edit.rationale == "the model answers in XML"
    path, auth, body = _Endpoint.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k" and body["model"] == "m"
    assert "not valid JSON" in body["messages"][0]["content"] and "TIMR" in body["messages"][0]["content"]


@pytest.mark.parametrize("reply, reason", [
    ("I think you should use XML.", "no top-level 'spec'"),
    ("spec: {name: x, interface: {name: yaml}}", "not a valid harness"),
    ("spec: [unclosed", "not YAML"),
])
def test_llm_editor_invalid_reply_is_refused_with_a_reason(endpoint, reply, reason):
    _Endpoint.reply = reply
    with pytest.raises(EditorError, match=reason):
        get_editor("llm")({"spec": SEED}, scores={}, failures=[], llm=endpoint)


def test_llm_editor_unreachable_endpoint_is_an_editor_error():
    cfg = LlmConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2)
    with pytest.raises(EditorError, match="127.0.0.1:9"):
        get_editor("llm")({"spec": SEED}, scores={}, failures=[], llm=cfg)


def _episodes(outcomes: str) -> list[dict]:
    """One episode per item from letters: S success, F clean failure, M failure with a mismatched turn."""
    return [{"item_id": f"i{n}", "success": int(o == "S"), "mismatched_turns": int(o == "M")}
            for n, o in enumerate(outcomes)]


@pytest.mark.parametrize("parent, edited, wins, p, accepted", [
    ("SSSSSSSFFFFFFFFF", "SSSSSSFFFFFFFFFF", (1, 0), 1 / 4, True),   # 7 vs 6 right on 16 items: one item is noise
    ("SSSFFFFFFFFFFFFF", "FSFFSFFFFFFFFFFF", (2, 1), 5 / 16, True),  # different items solved
    ("SSSSSSSFFFFFFFFF", "FFFFFFFFFFFFFFFF", (7, 0), 1 / 256, False),  # a clear loss
    ("FFFFFFFFFFFF", "MMMMMMMMMMMM", (12, 0), 1 / 8192, False),      # nothing solved; every edited turn log mismatched
    ("SSSSSFFFFFFF", "SSSSSFFFFFFF", (0, 0), 1 / 2, True),           # the same outcomes: nothing against the edit
    # 4:0 with 12 ties, as in a real round: the exact test's p is 1/16 and could not reject it
    ("SSSSSSSFFFFFFFFF", "SSSFFFFFFFFFFFFF", (4, 0), 1 / 32, False),
    ("SSSSSSFFFFFFFFFF", "SSSFFFFFFFFFFFFF", (3, 0), 1 / 16, True),  # 3:0 is within chance
    ("SSSSSSFFFFFFFFFF", "FSSSSSSFFFFFFFFF", (1, 1), 1 / 2, True),
])
def test_an_edit_stands_unless_its_parent_pair_wins_item_by_item_beyond_chance(parent, edited, wins, p, accepted):
    """accept_edit: not_significantly_worse pairs the two probes by item (success first, then a clean turn
    log) and rejects the edit only when the parent's wins are unlikely were both pairs equally good."""
    from engine.evolve.acceptance import ACCEPTANCE, sign_test

    class Probes:  # the two probes as the archive returns their episodes
        def episodes(self, eid):
            return _episodes(parent if eid == 1 else edited)

    verdict = ACCEPTANCE.get("not_significantly_worse")(Probes(), {"evaluation": 1}, {"evaluation": 2}, 0.05)
    assert verdict["accepted"] is accepted
    test = verdict["test"]
    assert (test["items"], test["parent_wins"], test["edited_wins"]) == (len(parent), *wins)
    assert test["p"] == pytest.approx(p, abs=1e-6)
    # items are paired by id, not by position
    assert sign_test(_episodes(parent)[::-1], _episodes(edited)) == {k: v for k, v in test.items() if k != "alpha"}


def test_approve_and_override_settle_once_with_an_audit_trail(archive):
    d1 = archive.add_decision(round_id=None, step=None, kind="inheritance", candidates=["c1", "c2"], evidence={},
                              choice="c1", rationale="best probe", status="proposed")
    assert approve(archive, d1, by="ana", comment="fine")["status"] == "approved"
    with pytest.raises(CoevoError, match="not pending"):
        approve(archive, d1, by="ana")
    d2 = archive.add_decision(round_id=None, step=None, kind="inheritance", candidates=["c1", "c2"], evidence={},
                              choice="c1", rationale="best probe", status="proposed")
    with pytest.raises(CoevoError, match="not a candidate"):
        override(archive, d2, "c9", by="bo")
    d = override(archive, d2, "c2", by="bo", comment="c2 knows XML")
    assert (d["status"], d["choice"], d["decided_by"], d["comment"]) == ("overridden", "c2", "bo", "c2 knows XML")


def test_gpu_profile_builds_a_zero3_torchrun_launch(tmp_path):
    gpu = load_profile("gpu")
    job = SftJob(model_dir="/models/Qwen3.5-9B", dataset="/d.jsonl", output_dir=str(tmp_path / "out"), profile=gpu)
    kw = swift_arguments(job)
    assert (kw["tuner_type"], kw["learning_rate"], kw["per_device_train_batch_size"], kw["bf16"],
            kw["deepspeed"], kw["optim"]) == ("full", 5e-6, 1, True, "zero3", "adamw_torch")
    cmd, env = launch_command(tmp_path / "job.json", gpu)
    assert cmd[1:4] == ["-m", "torch.distributed.run", f"--nproc_per_node={gpu.nproc_per_node}"]
    assert env["NPROC_PER_NODE"] == str(gpu.nproc_per_node)
    cpu = load_profile("cpu")
    cmd, env = launch_command(tmp_path / "job.json", cpu)
    assert "torch.distributed.run" not in cmd and env["OMP_NUM_THREADS"] == "1"
    assert swift_arguments(job.model_copy(update={"profile": cpu}))["torch_dtype"] == "float32"
    assert "packing" not in swift_arguments(job)  # padded batches unless a profile asks for packing
    packed = gpu.model_copy(update={"packing": True, "attn_impl": "flash_attn"})
    kw = swift_arguments(job.model_copy(update={"profile": packed}))
    assert (kw["packing"], kw["attn_impl"]) == (True, "flash_attn")
    assert kw["gradient_checkpointing"] is True  # a 9B model on a GPU recomputes activations to fit
    small = swift_arguments(job.model_copy(update={"profile": load_profile("cpu-pretrained")}))
    assert small["gradient_checkpointing"] is False and small["group_by_length"] is True  # no recompute, less padding
    assert "group_by_length" not in kw  # the GPU profile keeps ms-swift's shuffled batches


def test_an_sft_job_with_held_out_conversations_logs_their_loss(tiny_checkpoint, home_data, tmp_path):
    """The loss on conversations the job never trains on, after each epoch: how bench/sft.py compares
    training settings at the same quality."""
    from engine.jsonl import write_jsonl
    from engine.tasks.smart_home import SmartHomeTask
    from engine.train.data import gold_conversations
    task, spec = SmartHomeTask(home_data), HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    train, held = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    write_jsonl(train, gold_conversations(spec, task, task.load("train")[:8]))
    write_jsonl(held, gold_conversations(spec, task, task.load("dev")[:4]))
    profile = load_profile("cpu").model_copy(update={"num_train_epochs": 2})
    out = run_sft(SftJob(model_dir=str(tiny_checkpoint), dataset=str(train), output_dir=str(tmp_path / "out"),
                         profile=profile, val_dataset=str(held)))
    history = json.loads((out / "train_result.json").read_text())["log_history"]
    held_losses = [h["eval_loss"] for h in history if "eval_loss" in h]
    assert len(held_losses) >= 2 and all(math.isfinite(v) and v > 0 for v in held_losses)  # one an epoch at least


@pytest.fixture
def round_archive(archive, home_data):
    """An archive with the seed harness evaluated and task data in place (no model needed to edit)."""
    import shutil
    shutil.copytree(home_data, archive.files_dir / "tasks" / "smart_home")
    hid = archive.add_harness(SEED, creator="seed")
    cid = archive.add_checkpoint(name="root-json", path="/unused", kind="sft")
    archive.add_evaluation(dict(harness_id=hid, checkpoint_id=cid, task="smart_home", split="dev", score=0.2,
                                metrics={}, episodes=1, turns=1, mismatched_turns=1, timr=1.0, tokens=1, seconds=0),
                           [], [])
    return archive


def _edit_round(archive, llm):
    from engine.evolve.rounds import RoundRunner
    from engine.run_config import load_run_config
    cfg = load_run_config(editor="llm").model_copy(update={"llm": llm})
    runner = RoundRunner(archive, cfg, log=lambda m: None)
    rid = archive.open_round(cfg.mode, {})["id"]
    results = {"curate": runner._curate(rid, {})}
    return rid, runner._edit(rid, results)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_trainer_dies_with_the_run_that_started_it():
    """A run killed with SIGKILL leaves no SFT worker behind to write into the folder its resumed run
    trains in: the worker is started as start_sft starts it, and the kernel ends it with its parent."""
    run = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from engine.train.sft import die_with_parent\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], preexec_fn=die_with_parent)\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True, cwd=REPO)
    worker = int(run.stdout.readline())
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _alive(worker):
        time.sleep(0.1)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended; only its parent (gone) could reap it


def test_round_records_a_refused_llm_edit_and_goes_on_offline(round_archive, endpoint):
    _Endpoint.reply = "spec: {name: x, interface: {name: yaml}}"
    rid, edit = _edit_round(round_archive, endpoint)
    assert "not a valid harness" in edit["refused"]
    new = round_archive.harness(edit["harness"])
    assert new["creator"] == "editor:offline" and new["parents"] == ["h1"] and new["rationale"]
    (d,) = [round_archive.decision(x["id"]) for x in round_archive.decisions() if x["kind"] == "edit"]
    assert d["round_id"] == rid and "not a valid harness" in d["rationale"] and d["choice"] == "offline"


def test_round_turns_a_valid_llm_reply_into_a_harness(round_archive, endpoint):
    new = {**SEED, "strict": False}
    _Endpoint.reply = yaml.safe_dump({"rationale": "accept prose around the JSON", "spec": new})
    _, edit = _edit_round(round_archive, endpoint)
    h = round_archive.harness(edit["harness"])
    assert (h["creator"], h["rationale"], h["spec"]["strict"]) == ("editor:llm", "accept prose around the JSON", False)
    assert not [x for x in round_archive.decisions() if x["kind"] == "edit"]


def test_change_task_option_sets_one_declared_option_of_the_task():
    from engine.evolve.editors.offline import change_task_option
    from engine.tasks import task_class
    from engine.tasks.failure_attribution.task import parse_options
    spec = HarnessSpec.load(ASSETS / "harnesses" / "failure_attribution_json.yaml").to_dict()
    space = task_class("failure_attribution").option_space
    for seed in range(10):
        edit = change_task_option(spec, random.Random(seed), [])
        changed = {k: v for k, v in edit.spec["task_options"].items() if spec["task_options"].get(k) != v}
        (key, value), = changed.items()
        assert value in space[key] and key in edit.rationale
        parse_options(edit.spec["task_options"])  # the task accepts what the editor wrote
    # a harness silent on an option has its default: the edit changes what is in force, never restates it
    seen = {json.dumps(change_task_option(json.loads(json.dumps(SEED)), random.Random(seed), []).spec["task_options"])
            for seed in range(20)}
    assert seen == {'{"rooms": "mentioned"}', '{"state": "values"}'}


def test_fixed_task_options_are_kept_by_every_edit(round_archive, endpoint):
    # offline: never a fixed option, whatever the seed; with every option fixed, no option edit at all
    for seed in range(30):
        edit = get_editor("offline")({"spec": SEED}, rng=random.Random(seed), successes=[], scores={},
                                     fixed_task_options=["rooms"])
        assert "rooms" not in edit.spec.get("task_options", {})
        edit = get_editor("offline")({"spec": SEED}, rng=random.Random(seed), successes=[], scores={},
                                     fixed_task_options=["rooms", "state"])
        assert edit.operator != "change_task_option" and edit.spec.get("task_options") == SEED.get("task_options")
    # llm: a reply that changes a fixed option is refused, and the round goes on offline
    changed = {**SEED, "task_options": {"rooms": "mentioned"}}
    _Endpoint.reply = yaml.safe_dump({"rationale": "show only the mentioned rooms", "spec": changed})
    with pytest.raises(EditorError, match="fixed task options"):
        get_editor("llm")({"spec": SEED}, scores={}, failures=[], llm=endpoint, fixed_task_options=["rooms"])
    # a name the task does not have is an input error naming the field
    from engine.errors import InputError
    from engine.evolve.rounds import RoundRunner
    from engine.run_config import load_run_config
    with pytest.raises(InputError, match=r"fixed_task_options.*'room'"):
        RoundRunner(round_archive, load_run_config(fixed_task_options=["room"]), log=lambda m: None)


def test_the_offline_editor_favours_operators_for_the_parents_main_fault():
    from engine.evolve.editors.offline import FORMAT_OPERATORS, diagnose
    unparseable = {"score": 0.1, "timr": 0.6, "mismatch_kinds": {"unparseable": 9, "unknown tool": 1}}
    schema = {"score": 0.3, "timr": 0.2, "mismatch_kinds": {"unknown tool": 5, "wrong arguments": 3}}
    assert (diagnose(unparseable), diagnose(schema), diagnose({})) == ("format", "content", None)
    edit = get_editor("offline")
    successes = [{"input": "Turn on the light in the kitchen.",
                  "action": json.dumps([{"name": "kitchen.light.turn_on", "args": {}}])}]
    picks = {name: [edit({"spec": SEED}, rng=random.Random(s), successes=successes, scores=scores).operator
                    for s in range(200)] for name, scores in (("format", unparseable), ("content", schema))}
    share = {name: sum(op in FORMAT_OPERATORS for op in ops) / len(ops) for name, ops in picks.items()}
    # 3 of 8 operators are format operators (uniform: 0.375); favoured 4:1 they lead, disfavoured they trail
    assert share["format"] > 0.7 and share["content"] < 0.25, share
    again = edit({"spec": SEED}, rng=random.Random(7), successes=successes, scores=schema)
    assert again.operator == picks["content"][7] and "main fault: content" in again.rationale


def test_the_contenders_full_probe_runs_only_the_items_their_first_probe_did_not(archive, home_data):
    """Every candidate is probed on the first items, the two best on all of them: an item is run once per
    candidate, and each stored probe holds every one of its items."""
    from engine.evolve.inheritance import InheritContext, staged_probe
    from engine.tasks import get_task

    class Counting:
        """Answers every item with its gold calls on checkpoint c1, with error_input elsewhere."""
        def __init__(self, cid):
            self.cid, self.seen = cid, []

        def chat_prompt(self, messages):
            return messages[-1]["content"]

        def generate(self, prompts, **kw):
            self.seen += prompts
            out = []
            for p in prompts:
                item = next(i for i in items if i.input in p)
                calls = task.gold_calls(item) if self.cid == "c1" else [Call("error_input")]
                out.append((get_interface("json").render(calls), 5))
            return out

    from engine.harness.interfaces import Call, get_interface
    task = get_task("smart_home", home_data)
    items = task.load("dev")[:6]
    spec = HarnessSpec.from_dict(SEED)
    hid = archive.add_harness(SEED, creator="seed")
    cids = [archive.add_checkpoint(name=n, path=f"/nonexistent/{n}", kind="sft") for n in ("c1", "c2", "c3")]
    backends = {cid: Counting(archive.checkpoint(cid)["name"]) for cid in cids}
    ctx = InheritContext(archive, spec, task, items, latest=cids[0], start=cids[0], round=1, stage1=2, contenders=2,
                         backend_cache=dict(backends), harness_id=hid)
    results = staged_probe(ctx, cids)
    seen = {archive.checkpoint(c)["name"]: len(b.seen) for c, b in backends.items()}
    assert seen == {"c1": 6, "c2": 6, "c3": 2}  # two contenders to 6 items, the third stopped at 2
    assert all(len(b.seen) == len(set(b.seen)) for b in backends.values())  # no item run twice
    full = archive.evaluation(results[cids[0]]["evaluation"])
    assert results[cids[0]]["n"] == 6 and full["episodes"] == 6 and full["config"]["reused"] == 2
    assert results[cids[0]]["score"] == 1.0 and [e["item_id"] for e in archive.episodes(full["id"])] == \
        [i.id for i in items]
    # a pair's evaluation serves as its probe on items it holds, run on the same engine
    from engine.evolve.inheritance import read_probe
    from engine.models import BackendSpec
    read = read_probe(ctx, full, items[2:5])
    assert read == {"score": 1.0, "timr": 0.0, "n": 3, "evaluation": full["id"]}
    assert read_probe(ctx, full, task.load("dev")[5:7]) is None  # item 6 is not in it
    other = InheritContext(**{**ctx.__dict__, "backend": BackendSpec(name="ctranslate2", compute_type="int8")})
    assert read_probe(other, full, items[2:5]) is None
