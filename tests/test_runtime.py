import json

import pytest

from engine import ASSETS
from engine.harness.interfaces import get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import build_messages, episode_rows, run_episodes, summarize
from engine.tasks import get_task


class ScriptedBackend:
    """Answers each prompt from a function of (episode input, turn); records every batch it was given."""

    def __init__(self, answer):
        self.answer, self.batches = answer, []

    def chat_prompt(self, messages):
        return repr(messages)

    def generate(self, prompts, **kw):
        self.batches.append(len(prompts))
        return [(self.answer(eval(p)), 7) for p in prompts]


def _spec(name="smart_home_json", **loop):
    spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
    return spec.model_copy(update={"loop": spec.loop.model_copy(update=loop)}) if loop else spec


@pytest.fixture
def task(home_data):
    return get_task("smart_home", home_data)


def _gold_answer(task, items, iface):
    # the same instruction can occur in two homes: key on the system prompt (the home) too
    by_prompt = {(build_messages(_spec(), task, i)[0]["content"], i.input): i for i in items}
    return lambda m: iface.render(task.gold_calls(by_prompt[(m[0]["content"], m[-1]["content"])]))


def test_gold_answers_in_the_harness_format_score_one_with_no_mismatch(task):
    items = task.load("dev")
    backend = ScriptedBackend(_gold_answer(task, items, get_interface("json")))
    episodes = run_episodes(_spec(), task, backend, items)
    stats = summarize(episodes)
    assert stats["timr"] == 0.0 and stats["turns"] == len(items)
    assert task.score(items, [e.prediction for e in episodes])[0] == 1.0
    assert backend.batches == [len(items)]  # one batched call for all episodes


def test_answers_in_another_format_are_all_mismatches(task):
    items = task.load("dev")[:10]
    backend = ScriptedBackend(_gold_answer(task, items, get_interface("xml")))
    episodes = run_episodes(_spec(), task, backend, items)
    assert summarize(episodes)["timr"] == 1.0
    assert all(e.turns[0].parse_error and e.prediction is None and not e.success for e in episodes)


def test_retry_on_parse_error_gives_the_model_another_turn(task):
    items = task.load("dev")[:6]
    gold = _gold_answer(task, items, get_interface("json"))

    def answer(messages):  # wrong format first, right format after the environment's complaint
        if messages[-1]["content"].startswith("Your answer"):
            return gold(messages[:-2])  # [..., user task, assistant "oops", user complaint]
        return "oops"

    episodes = run_episodes(_spec(max_turns=3, retry_on_parse_error=True), task, ScriptedBackend(answer), items)
    for e in episodes:
        assert [t.mismatch for t in e.turns] == [True, False]
        assert "could not be parsed" in e.turns[0].feedback and e.success
    stats = summarize(episodes)
    assert stats["timr"] == 0.5 and stats["turns"] == 12


def test_k_samples_per_item_and_rows_for_the_archive(task):
    items = task.load("dev")[:4]
    episodes = run_episodes(_spec(), task, ScriptedBackend(lambda m: "[]"), items, k=3)
    assert len(episodes) == 12 and sorted({e.sample for e in episodes}) == [0, 1, 2]
    ep_rows, turn_rows = episode_rows(episodes)
    assert len(ep_rows) == 12 and len(turn_rows) == 12
    assert all(t["mismatch"] == 1 and t["parse_error"] == "no call in the output" for t in turn_rows)


def test_few_shot_answers_follow_the_harness_interface(task):
    shots = [{"input": "Turn on the light in the kitchen.", "calls": [{"name": "kitchen.light.turn_on", "args": {}}]}]
    spec = HarnessSpec.from_dict({**_spec().to_dict(), "few_shot": shots})
    item = task.load("dev")[0]
    assert build_messages(spec, task, item)[2]["content"] == '[{"name": "kitchen.light.turn_on", "args": {}}]'
    xml = HarnessSpec.from_dict({**spec.to_dict(), "interface": {"name": "xml"}})
    assert build_messages(xml, task, item)[2]["content"].startswith("<calls>")


def test_rejection_sampling_caps_one_category_of_successes(tmp_path):
    """A model that refuses everything is right on every DENY row and on no PERMIT row: its successes
    are all refusals, and with max_share < 1 none of them is kept to train on."""
    from engine.evolve.sampling import balance, rejection_sample
    from engine.jsonl import read_jsonl
    from conftest import REPO
    task = get_task("rbac_sql", REPO / "tests" / "fixtures" / "rbac_sql")
    items = task.load("department_store_8")
    spec = HarnessSpec.load(ASSETS / "harnesses" / "rbac_sql_json.yaml")
    refuse = ScriptedBackend(lambda m: '[{"name": "refuse", "args": {}}]')
    denies = sum(i.category == "DENY" for i in items)
    assert 0 < denies < len(items)
    counts = rejection_sample(spec, task, refuse, items, k=1, temperature=0.0, out_path=tmp_path / "all.jsonl")
    assert counts["kept"] == denies == len(list(read_jsonl(tmp_path / "all.jsonl")))
    counts = rejection_sample(spec, task, refuse, items, k=1, temperature=0.0, out_path=tmp_path / "capped.jsonl",
                              max_share=0.8)
    assert counts["kept"] == 0 and list(read_jsonl(tmp_path / "capped.jsonl")) == []
    # mixed successes: the largest category is cut to max_share of what is kept
    out = balance({"DENY": list(range(10)), "PERMIT": list(range(2))}, 0.75)
    assert len(out["DENY"]) == 6 and len(out["PERMIT"]) == 2
    with pytest.raises(ValueError):
        balance({"a": [1]}, 0.3)


def test_rejection_sampling_balances_kinds_of_answer_not_categories(tmp_path, home_data):
    """Invalid single and invalid multiple requests (two categories) want one kind of answer, error_input
    alone: a model that abstains on everything has nothing else to show, so max_share keeps none of it."""
    from engine.evolve.sampling import rejection_sample
    task = get_task("smart_home", home_data)
    items = task.load("dev")
    spec = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
    calls = {i.input: len(task.gold_calls(i)) for i in items}  # abstain once per requested operation
    abstain = ScriptedBackend(lambda m: json.dumps([{"name": "error_input", "args": {}}] * calls[m[-1]["content"]]))
    invalid = [i for i in items if task.answer_kind(i) == "error_input"]
    assert {i.category for i in invalid} == {"IS", "IM"}
    assert {task.answer_kind(i) for i in items if i.category in ("VS", "VM", "MM")} == {"calls"}
    counts = rejection_sample(spec, task, abstain, items, k=1, temperature=0.0, out_path=tmp_path / "all.jsonl")
    assert counts["kept"] == len(invalid)
    counts = rejection_sample(spec, task, abstain, items, k=1, temperature=0.0, out_path=tmp_path / "capped.jsonl",
                              max_share=0.5)
    assert counts["kept"] == 0
