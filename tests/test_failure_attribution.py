"""The failure-attribution vertical: Who&When and TraceElephant loaders, the official metrics, the
synthetic generator, the blame tool schema, and gold episodes through the environment, the training
data and the rollout runtime under every seed harness and protocol. One file over 400 lines: the
vertical's parts are tested together against the same real samples and fixtures."""
import json
from pathlib import Path

import pytest

from conftest import REPO, SHARED_DATA, write_lines

from engine import ASSETS
from engine.errors import InputError
from engine.harness.interfaces import Call, get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import run_episodes, summarize
from engine.tasks import get_task, task_class
from engine.tasks.failure_attribution import generator
from engine.tasks.failure_attribution.scorer import hits, read_predictions, score_traces, score_whowhen
from engine.tasks.failure_attribution.task import FailureAttributionTask, parse_options
from engine.tasks.failure_attribution.traces import load_traces

FIXTURES = REPO / "tests" / "fixtures" / "who_and_when"
ALGO = FIXTURES / "Algorithm-Generated"
ELEPHANT = FIXTURES / "TraceElephant"
REAL = SHARED_DATA / "who_and_when"
HARNESSES = ["failure_attribution_json", "failure_attribution_xml", "failure_attribution_tool_call"]
PROTOCOLS = [{"protocol": "all_at_once"}, {"protocol": "step_by_step", "window": 3},
             {"protocol": "binary_search", "window": 2}]


def _spec(name, **options):
    spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
    return spec.model_copy(update={"task_options": {**spec.task_options, **options}})


def _whowhen(**over) -> dict:
    rec = {"question": "q?", "ground_truth": "4", "history": [
        {"content": "plan", "name": "Planner", "role": "assistant"},
        {"content": "result 5", "name": "Coder", "role": "assistant"},
        {"content": "TERMINATE", "name": "Planner", "role": "assistant"}],
        "mistake_agent": "Coder", "mistake_step": "1", "mistake_reason": "wrong"}
    rec.update(over)
    return rec


def _write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def _gold_preds(traces) -> list[dict]:
    return [{"id": t.id, "agent": t.mistake_agent, "step": t.mistake_step} for t in traces]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("fa")
    FailureAttributionTask.generate(d, seed=3, sizes={"train": 30, "dev": 24})
    return d


# ---- loaders -------------------------------------------------------------------------------------

@pytest.mark.skipif(not REAL.exists(), reason="the shared Who&When sample is not beside this checkout")
def test_real_who_and_when_loads_and_scores_one_with_gold_as_predictions(tmp_path):
    traces, rejected = load_traces(REAL)
    files = sorted(REAL.rglob("*.json"))
    assert len(traces) + len(rejected) == len(files) == 126
    by_id = {t.id: t for t in traces}
    t = by_id["Algorithm-Generated/17"]
    raw = json.loads((REAL / "Algorithm-Generated" / "17.json").read_text())
    assert t.steps[0] == (raw["history"][0]["name"], raw["history"][0]["role"], raw["history"][0]["content"])
    assert t.mistake_step == int(raw["mistake_step"]) and t.mistake_agent == raw["mistake_agent"]
    assert t.subfolder == "Algorithm-Generated" and t.source == "who_and_when"
    pred = write_lines(tmp_path / "pred.jsonl", _gold_preds(traces))
    for rule in ("exact", "substring"):
        result = score_whowhen(REAL, pred, rule=rule)
        assert result["rule"] == rule and result["unknown_ids"] == []
        assert result["overall"] == {"n": len(traces), "agent_accuracy": 1.0, "step_accuracy": 1.0}
        assert result["by_subfolder"]["Algorithm-Generated"]["n"] == len(traces)
        assert len(result["rejected"]) == len(rejected)


def test_committed_who_and_when_fixtures_load_as_the_files_say():
    traces, rejected = load_traces(ALGO)
    assert rejected == [] and [t.id for t in traces] == ["21", "47", "93"]  # natural order, ids relative to root
    t = traces[1]
    raw = json.loads((ALGO / "47.json").read_text())
    assert t.question == raw["question"] and t.ground_truth == "536"
    assert len(t.steps) == len(raw["history"]) == 6
    assert t.mistake_agent == "Mesopotamian_Number_Systems_Expert" and t.mistake_step == 1
    assert t.meta["question_ID"] == raw["question_ID"] and t.subfolder == "Algorithm-Generated"
    assert (FIXTURES / "LICENSE").read_text().startswith("MIT License")
    # from the fixtures' root the ids carry the subset, as in the official layout
    assert "Algorithm-Generated/47" in {t.id for t in load_traces(FIXTURES)[0]}


def test_hand_crafted_entries_name_the_agent_in_role(tmp_path):
    rec = _whowhen(history=[{"content": "find it", "role": "Orchestrator (thought)"},
                            {"content": "opened a page", "role": "WebSurfer"}],
                   mistake_agent="WebSurfer", mistake_step="1")
    (t,), _ = load_traces(_write(tmp_path / "Hand-Crafted" / "3.json", rec).parent.parent)
    assert t.id == "Hand-Crafted/3" and [s.agent for s in t.steps] == ["Orchestrator (thought)", "WebSurfer"]


def test_trace_elephant_fixture_is_read_with_one_based_steps():
    traces, rejected = load_traces(ELEPHANT)
    assert rejected == []
    by_id = {t.id: t for t in traces}
    assert set(by_id) == {"captain-runs-demo/task-7", "magentic-runs-demo/task-1"}
    t = by_id["magentic-runs-demo/task-1"]
    assert t.source == "trace_elephant" and t.subfolder == "magentic-runs-demo"
    assert t.mistake_agent == "WebSurfer" and t.mistake_step == 2  # 1-based 3 in the file
    assert t.steps[2].agent == "WebSurfer" and "UK band's discography" in t.steps[2].content  # a ChatCompletion repr
    assert t.steps[1].content.startswith("web_search(")     # a completion that only calls a tool
    assert t.steps[4].content.startswith("WebSurfer reported 6")  # no completion: the request's last message
    assert t.steps[5].content == "FINAL ANSWER: 6"         # content parts
    assert t.meta["agent_system_intro"].startswith("Magentic-One")
    c = by_id["captain-runs-demo/task-7"]
    assert c.ground_truth == "77" and c.mistake_step == 1 and c.steps[1].content.endswith("Their sum is 58.")
    # one task folder on its own
    (one,), _ = load_traces(ELEPHANT / "captain-runs-demo" / "task-7")
    assert one.id == "task-7" and one.mistake_agent == "Math_Expert"


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("question"), "question"),
    (lambda r: r.update(history={"a": 1}), "history"),
    (lambda r: r.update(mistake_step=[1]), "mistake_step"),
    (lambda r: r.pop("mistake_agent"), "mistake_agent"),
    (lambda r: r["history"][1].pop("name") and r["history"][1].pop("role"), "history[1].name"),
    (lambda r: r["history"][2].update(content=["x"]), "history[2].content"),
])
def test_malformed_who_and_when_files_name_the_file_and_field(tmp_path, mutate, field):
    rec = _whowhen()
    mutate(rec)
    path = _write(tmp_path / "set" / "7.json", rec)
    with pytest.raises(InputError) as e:
        load_traces(tmp_path / "set")
    assert e.value.field == field and e.value.path == path and str(path) in str(e.value)


def test_a_file_that_is_not_json_is_named(tmp_path):
    path = _write(tmp_path / "1.json", '{"question": ')
    with pytest.raises(InputError, match="not valid JSON") as e:
        load_traces(tmp_path)
    assert e.value.path == path


def _elephant_task(root: Path, meta: dict | None = None, steps=None) -> Path:
    d = root / "captain-runs-x" / "task-1"
    _write(d / "trace_metadata.json", meta if meta is not None else
           {"task_instruction": "q?", "ground_truth": "1", "mistake_agent": "B", "mistake_step": 2})
    if steps is not False:
        _write(d / "step_records.json", steps if steps is not None else
               [{"agent_name": "A", "input": {"messages": []}, "output": "hi"},
                {"agent_name": "B", "input": {"messages": []}, "output": "wrong"}])
    return d


@pytest.mark.parametrize("meta, steps, file, field", [
    ({"ground_truth": "1", "mistake_agent": "B", "mistake_step": 2}, None, "trace_metadata.json", "task_instruction"),
    ({"task_instruction": "q", "mistake_agent": "B"}, None, "trace_metadata.json", "mistake_step"),
    (None, [{"input": {}, "output": "x"}], "step_records.json", "[0].agent_name"),
    (None, [{"agent_name": "A", "output": 5}], "step_records.json", "[0].output"),
    (None, [{"agent_name": "A", "output": {"choices": "x"}}], "step_records.json", "[0].output.choices"),
    (None, False, "step_records.json", None),
])
def test_malformed_trace_elephant_files_name_the_file_and_field(tmp_path, meta, steps, file, field):
    d = _elephant_task(tmp_path, meta, steps)
    with pytest.raises(InputError) as e:
        load_traces(tmp_path)
    assert e.value.path == d / file and e.value.field == field


def test_unusable_labels_are_rejected_with_the_reason_and_never_dropped(tmp_path):
    root = tmp_path / "set"
    _write(root / "ok.json", _whowhen())
    _write(root / "none.json", _whowhen(mistake_step="none"))
    _write(root / "far.json", _whowhen(mistake_step="3"))
    _write(root / "noagent.json", _whowhen(mistake_agent=""))
    _elephant_task(root, {"task_instruction": "q", "mistake_agent": "B", "mistake_step": 0})  # 1-based: 0 is none
    traces, rejected = load_traces(root)
    assert [t.id for t in traces] == ["ok"]
    reasons = {r.id: r.reason for r in rejected}
    assert set(reasons) == {"none", "far", "noagent", "captain-runs-x/task-1"}
    assert "not a step index" in reasons["none"] and "out of range" in reasons["far"]
    assert "3 steps" in reasons["far"] and "no mistake_agent" in reasons["noagent"]
    assert "1-based" in reasons["captain-runs-x/task-1"]
    # the scorer lists them and leaves them out of n; the task keeps them for the caller to report
    pred = write_lines(tmp_path / "p.jsonl", [{"id": "ok", "agent": "Coder", "step": 1},
                                              {"id": "far", "agent": "Coder", "step": 1}])
    result = score_whowhen(root, pred)
    assert result["overall"]["n"] == 1 and len(result["rejected"]) == 4 and result["unknown_ids"] == []
    assert any(r.startswith("none: ") for r in result["rejected"])
    task = get_task("failure_attribution", tmp_path)
    with pytest.warns(UserWarning, match="4 trace.s. of 'set' not loaded"):
        assert [i.id for i in task.load("set")] == ["ok"] and len(task.rejected) == 4


# ---- the scorer ----------------------------------------------------------------------------------

def test_gold_as_predictions_scores_one_on_the_fixtures(tmp_path):
    traces, _ = load_traces(FIXTURES)
    pred = write_lines(tmp_path / "p.jsonl", _gold_preds(traces))
    result = score_whowhen(FIXTURES, pred)
    assert result["overall"] == {"n": 5, "agent_accuracy": 1.0, "step_accuracy": 1.0}
    assert set(result["by_subfolder"]) == {"Algorithm-Generated", "TraceElephant"}


def test_partial_credit_by_hand_under_both_rules(tmp_path):
    # gold: 21 -> (Lyrics_Expert, 0), 47 -> (Mesopotamian_Number_Systems_Expert, 1), 93 -> (FilmCritic_Expert, 4)
    pred = write_lines(tmp_path / "p.jsonl", [
        {"id": "Algorithm-Generated/21", "agent": "Lyrics_Expert", "step": 0},                  # both right
        {"id": "Algorithm-Generated/47.json", "agent": "Mesopotamian_Number_Systems_Expert (thought)", "step": 11},
        {"id": "Hand-Crafted/9", "agent": "X", "step": 1},                                     # unknown trace
    ])                                                                                         # 93: no prediction
    exact = score_whowhen(FIXTURES, pred)
    n = 5  # three Who&When traces and two TraceElephant ones; the two without predictions count as wrong
    assert exact["rule"] == "exact" and exact["overall"] == {"n": n, "agent_accuracy": 1 / n, "step_accuracy": 1 / n}
    assert exact["by_subfolder"]["Algorithm-Generated"] == {"n": 3, "agent_accuracy": 1 / 3, "step_accuracy": 1 / 3}
    assert exact["by_subfolder"]["TraceElephant"] == {"n": 2, "agent_accuracy": 0.0, "step_accuracy": 0.0}
    assert exact["unknown_ids"] == ["Hand-Crafted/9"]
    sub = score_whowhen(FIXTURES, pred, rule="substring")  # gold "1" is in "11", the name is in the longer one
    assert sub["rule"] == "substring" and sub["by_subfolder"]["Algorithm-Generated"] == {
        "n": 3, "agent_accuracy": 2 / 3, "step_accuracy": 2 / 3}
    assert hits("A", 1, {"agent": "AB", "step": 12}, "substring") == (True, True)
    assert hits("AB", 12, {"agent": "A", "step": 1}, "substring") == (False, False)
    assert hits("A", 1, None) == (False, False)


@pytest.mark.parametrize("row, line, field", [
    ({"agent": "A", "step": 1}, 2, "id"),
    ({"id": "x", "step": 1}, 2, "agent"),
    ({"id": "x", "agent": "A", "step": "1"}, 2, "step"),
    ({"id": "x", "agent": "A", "step": True}, 2, "step"),
    ({"id": "a", "agent": "A", "step": 2}, 2, "id"),  # a second prediction for a
])
def test_bad_prediction_rows_name_the_line_and_field(tmp_path, row, line, field):
    path = write_lines(tmp_path / "p.jsonl", [{"id": "a", "agent": "A", "step": 1}, row])
    with pytest.raises(InputError) as e:
        read_predictions(path)
    assert (e.value.line, e.value.field) == (line, field)


def test_unknown_rule_is_refused():
    with pytest.raises(InputError, match="unknown match rule"):
        score_traces([], {}, rule="fuzzy")


# ---- the generator -------------------------------------------------------------------------------

def test_generator_is_deterministic_and_round_trips_through_the_loader(tmp_path, synthetic):
    FailureAttributionTask.generate(tmp_path / "a", seed=3, sizes={"train": 30, "dev": 24})
    FailureAttributionTask.generate(tmp_path / "b", seed=4, sizes={"train": 30, "dev": 24})
    files = sorted(p.relative_to(synthetic) for p in synthetic.rglob("*.json"))
    assert files == sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json"))
    assert all((synthetic / f).read_bytes() == (tmp_path / "a" / f).read_bytes() for f in files)
    assert (synthetic / "dev" / "30.json").exists()  # numbered on across splits: ids stay unique
    assert any((synthetic / f).read_bytes() != (tmp_path / "b" / f).read_bytes() for f in files)

    traces, rejected = load_traces(synthetic / "train")
    assert rejected == [] and len(traces) == 30
    kinds = set()
    for t in traces:
        raw = json.loads((synthetic / "train" / f"{t.id}.json").read_text())
        assert t.mistake_step == int(raw["mistake_step"]) and t.mistake_agent == raw["mistake_agent"]
        assert t.steps[t.mistake_step].agent == t.mistake_agent  # the culprit wrote the decisive step
        assert 5 <= len(t.steps) <= 10 and all(len(s.content) < 120 for s in t.steps)
        assert t.steps[-1].content.endswith("TERMINATE") and t.ground_truth.lstrip("-").isdigit()
        assert f"Final answer: {t.ground_truth}." not in t.steps[-1].content  # the run failed
        kinds.add(raw["mistake_kind"])
    assert kinds == set(generator.KINDS)
    assert len({a for t in traces for a in t.agents}) >= 8


def test_generated_errors_contradict_the_text():
    import random
    rng = random.Random(0)
    for n in range(400):
        rec = generator.make_trace(rng, n)
        steps, k, q = rec["history"], int(rec["mistake_step"]), rec["question"]
        bad = steps[k]["content"]
        if rec["mistake_kind"] == "wrong_tool_arguments":
            searched = bad.split('"')[1]  # search("<attribute> in <town>")
            attr, town = searched.split(" in ")
            assert attr not in q or town not in q
        elif rec["mistake_kind"] == "premature_termination":
            assert "Final answer" in bad and not any("Result:" in s["content"] or "->" in s["content"]
                                                     for s in steps[k - 2:k])
        # before the decisive step nothing is final
        assert not any("Final answer" in s["content"] for s in steps[:k])


def test_regenerating_a_smaller_split_leaves_no_stale_files(tmp_path):
    FailureAttributionTask.generate(tmp_path, seed=0, sizes={"dev": 6})
    FailureAttributionTask.generate(tmp_path, seed=0, sizes={"dev": 2})
    assert sorted(p.name for p in (tmp_path / "dev").iterdir()) == ["0.json", "1.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["dev"]


# ---- the task ------------------------------------------------------------------------------------

def _all_items(synthetic):
    real = get_task("failure_attribution", FIXTURES)
    return (get_task("failure_attribution", synthetic).load("dev") + real.load("Algorithm-Generated")
            + real.load("TraceElephant"))


def test_registration_split_paths_and_items(synthetic):
    assert task_class("failure_attribution") is FailureAttributionTask
    task = get_task("failure_attribution", synthetic)
    items = task.load("dev", limit=5)
    assert len(items) == 5 and items[0].id == "30" and items[0].input.endswith("?")
    assert items[0].gold == {"agent": items[0].context.mistake_agent, "step": items[0].context.mistake_step}
    assert items[0].category in generator.KINDS
    assert len(task.load(str(ALGO))) == 3 and task.split_path(str(ALGO / "47.json")).name == "47.json"
    with pytest.raises(InputError, match="no split 'nope'"):
        task.split_path("nope")


def test_context_windows_truncates_and_shows_the_ground_truth_on_request():
    task = get_task("failure_attribution", FIXTURES)
    item = task.load("Algorithm-Generated")[1]
    full = task.context(item, {"with_ground_truth": True, "max_step_chars": 50})
    assert "Correct answer to the question: 536" in full and "[5] Mesopotamian_Number_Systems_Expert: TERMINATE" in full
    assert all(len(line) <= 50 + len("[0] Mesopotamian_Number_Systems_Expert: ") for line in full.splitlines()[2:])
    short = task.context(item, {"window": 2})
    assert "536" not in short and "[1] " in short and "[2] " not in short and "(steps 2-5 not shown)" in short
    stepwise = task.context(item, {"protocol": "step_by_step", "window": 4})
    assert "[3] " in stepwise and "[4] " not in stepwise and "call next() for the next 2" in stepwise


@pytest.mark.parametrize("options, field", [
    ({"protocol": "binary"}, "task_options.protocol"),
    ({"window": 0}, "task_options.window"),
    ({"max_step_chars": "long"}, "task_options.max_step_chars"),
    ({"colour": "red"}, "task_options.colour"),
])
def test_bad_task_options_name_the_option(options, field):
    with pytest.raises(InputError) as e:
        parse_options(options)
    assert e.value.field == field


def test_the_option_space_is_valid_options():
    for key, values in FailureAttributionTask.option_space.items():
        for v in values:
            parse_options({key: v})


@pytest.mark.parametrize("call, reason", [
    (Call("attribute", {"agent": "A", "step": 1}), "unknown tool 'attribute'"),
    (Call("blame", {"agent": "A"}), "missing ['step']"),
    (Call("blame", {"agent": "A", "step": 1, "why": "x"}), "unexpected ['why']"),
    (Call("blame", {"agent": "A", "step": "1"}), "step must be an integer"),
    (Call("blame", {"agent": "A", "step": True}), "step must be an integer"),
    (Call("blame", {"agent": 3, "step": 1}), "agent must be a non-empty string"),
    (Call("next", {"n": 2}), "next takes no arguments"),
])
def test_check_call_reports_tool_schema_mismatches(call, reason, synthetic):
    task = get_task("failure_attribution", synthetic)
    item = task.load("dev", limit=1)[0]
    assert reason in task.check_call(call, item)
    assert task.check_call(task.example_call(), item) is None and task.check_call(Call("next"), item) is None
    # a blame of an agent who is not in the trace is a wrong answer, not a mismatch
    assert task.check_call(Call("blame", {"agent": "Nobody", "step": 99}), item) is None


@pytest.mark.parametrize("options", PROTOCOLS)
def test_every_gold_episode_succeeds_through_the_environment(options, synthetic):
    task = get_task("failure_attribution", synthetic)
    for item in _all_items(synthetic):
        env = task.environment(item, options)
        turns = task.gold_turns(item, options)
        for calls in turns[:-1]:
            assert calls in ([Call("next")], [Call("half", {"part": "first"})], [Call("half", {"part": "second"})])
            r = env.step(calls)
            assert not r.done and r.reward == 0 and "[" in r.feedback
        r = env.step(turns[-1])
        assert r.done and r.success and r.reward == 1.0 and r.prediction == item.gold, item.id
        if options["protocol"] == "step_by_step":
            assert len(turns) == item.gold["step"] // 3 + 1
        if options["protocol"] == "binary_search":  # halved until at most `window` steps are left
            lo, hi = env.range
            assert hi - lo <= 2 and lo <= item.gold["step"] < hi and len(turns) > 1


def test_rewards_for_half_right_and_running_out_of_steps(synthetic):
    task = get_task("failure_attribution", synthetic)
    item = task.load("dev", limit=1)[0]
    agent, step = item.gold["agent"], item.gold["step"]
    r = task.environment(item).step([Call("blame", {"agent": agent, "step": step + 1})])
    assert (r.reward, r.success, r.done) == (0.5, False, True)
    r = task.environment(item).step([Call("next")])  # all_at_once has nothing more to show
    assert r.done and not r.success and r.prediction is None
    env = task.environment(item, {"protocol": "step_by_step", "window": 4})
    hidden_chunks = -(-(item.meta["steps"] - 4) // 4)
    assert [env.step([Call("next")]).done for _ in range(hidden_chunks + 1)] == [False] * hidden_chunks + [True]
    score, metrics = task.score([item, item, item], [{"agent": agent, "step": step},
                                                     {"agent": agent, "step": step + 1}, None])
    assert metrics["agent_accuracy"] == pytest.approx(2 / 3) and metrics["step_accuracy"] == pytest.approx(1 / 3)
    assert score == pytest.approx(0.5) and metrics["n"] == 3 and metrics["by_category"][item.category]["n"] == 3


@pytest.mark.parametrize("options", PROTOCOLS)
@pytest.mark.parametrize("harness", HARNESSES)
def test_gold_conversations_for_every_seed_harness_and_protocol(harness, options, synthetic):
    from engine.train.data import gold_conversations
    spec = _spec(harness, **options)
    task = get_task("failure_attribution", synthetic)
    items = _all_items(synthetic)
    iface = get_interface(spec.interface.name)
    rows = gold_conversations(spec, task, items)
    for item, row in zip(items, rows):
        msgs = row["messages"]
        assert msgs[0]["role"] == "system" and "blame" in msgs[0]["content"] and msgs[1]["content"] == item.input
        answers = [m for m in msgs if m["role"] == "assistant"]
        assert len(answers) == len(task.gold_turns(item, spec.task_options))
        assert iface.parse(answers[-1]["content"]) == task.gold_calls(item)
        if len(answers) > 1:  # the environment's next chunk (or narrowed range) comes between the turns
            assert msgs[3]["role"] == "user"
            if options["protocol"] == "step_by_step":
                assert f"[{3}]" in msgs[3]["content"]
            else:
                assert "[" in msgs[3]["content"] and msgs[3]["content"] in task.environment(
                    item, options).step(task.gold_turns(item, options)[0]).feedback


class GoldBackend:
    """Answers every turn with the gold turn of the episode's item, rendered in the harness's interface."""

    def __init__(self, spec, task, items, interface=None):
        self.iface = get_interface(interface or spec.interface.name)
        self.turns = {(i.context.id, i.input): task.gold_turns(i, spec.task_options) for i in items}
        self.by_prompt = {}
        from engine.rollout import build_messages
        for i in items:
            self.by_prompt[build_messages(spec, task, i)[0]["content"] + i.input] = (i.context.id, i.input)

    def chat_prompt(self, messages):
        return messages

    def generate(self, prompts, **kw):
        out = []
        for msgs in prompts:
            key = self.by_prompt[msgs[0]["content"] + msgs[1]["content"]]
            turn = sum(m["role"] == "assistant" for m in msgs)
            out.append((self.iface.render(self.turns[key][turn]), 9))
        return out


@pytest.mark.parametrize("options", PROTOCOLS)
@pytest.mark.parametrize("harness", HARNESSES)
def test_run_episodes_with_gold_outputs_succeeds(harness, options, synthetic):
    spec = _spec(harness, **options)
    task = get_task("failure_attribution", synthetic)
    items = _all_items(synthetic)
    episodes = run_episodes(spec, task, GoldBackend(spec, task, items), items)
    stats = summarize(episodes)
    assert stats["timr"] == 0.0 and all(e.success for e in episodes)
    assert task.score(items, [e.prediction for e in episodes])[0] == 1.0
    if options["protocol"] != "all_at_once":
        assert stats["turns"] > len(items)


def test_answers_in_another_interface_are_mismatches(synthetic):
    spec = _spec("failure_attribution_json")
    task = get_task("failure_attribution", synthetic)
    items = task.load("dev", limit=4)
    episodes = run_episodes(spec, task, GoldBackend(spec, task, items, interface="xml"), items)
    assert summarize(episodes)["timr"] == 1.0 and not any(e.success for e in episodes)


def test_binary_search_shows_wide_ranges_coarsely_and_checks_half(synthetic):
    task = get_task("failure_attribution", synthetic)
    item = max(_all_items(synthetic), key=lambda i: i.meta["steps"])
    options = {"protocol": "binary_search", "window": 2, "max_step_chars": 200}
    wide = task.context(item, options)
    assert "half(part=\"first\")" in wide
    longest = max(len(line) for line in wide.splitlines() if line.startswith("["))
    full = max(len(line) for line in task.context(item, {"max_step_chars": 200}).splitlines() if line.startswith("["))
    assert longest < full  # each step is cut to fit a window's worth of characters
    assert task.check_call(Call("half", {"part": "second"}), item) is None
    for bad in ({}, {"part": "third"}, {"part": "first", "extra": 1}):
        assert "half takes" in task.check_call(Call("half", bad), item)
    env = task.environment(item, {"protocol": "all_at_once"})
    assert not env.step([Call("half", {"part": "first"})]).done  # nothing to narrow outside the protocol
