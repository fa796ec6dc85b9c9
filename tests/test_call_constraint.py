"""Constrained decoding of calls (`sampling.constrain_calls`): a name outside the item's tools is decoded again
from where it went astray, with the most probable token that keeps it allowed, backing off a dead end; a call
with the wrong argument names is rendered up to the argument it lacks, or without those it should not have,
and the model goes on from there. A turn mended this way is no mismatch, and the archive records it."""
import pytest

from engine import ASSETS
from engine.call_constraint import RESUME_BUDGET, NameSet, name_opener
from engine.errors import CoevoError
from engine.harness.interfaces import Call, get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import build_messages, episode_rows, run_episodes, summarize
from engine.tasks import get_task
from engine.tasks.base import Item
from engine.tasks.smart_home.task import split_name

OPEN, CLOSE = '[{"name": "', '", "args": {}}]'


class TokenModel:
    """A model that knows a few answers, each a list of tokens, in order of preference: it continues a text
    with the first answer that extends it, and ranks as next tokens those of the answers that reach the text
    on a token boundary (then tokens of no answer)."""

    JUNK = ["zz", "#"]

    def __init__(self, prompt: str, answers: list[list[str]]):
        self.prompt, self.answers, self.ranked = prompt, answers, []
        self.tokenizer = lambda text, add_special_tokens=False: {"input_ids": text.split()}

    def chat_prompt(self, messages):
        return self.prompt

    def generate(self, prompts, **kw):
        out = []
        for p in prompts:
            text = p[len(self.prompt):]
            answer = next(("".join(a) for a in self.answers if "".join(a).startswith(text)), text)
            out.append((answer[len(text):], 5))
        return out

    def next_tokens(self, prompt, *, n):
        text = prompt[len(self.prompt):]
        self.ranked.append(text)
        tokens = []
        for a in self.answers:
            for i in range(len(a)):
                if "".join(a[:i]) == text and a[i] not in tokens:
                    tokens.append(a[i])
        return (tokens + self.JUNK)[:n]


def answer(room: str, device: str, method: str) -> list[str]:
    return [OPEN, room, ".", device, ".", method, CLOSE]


def _constrained(name: str) -> HarnessSpec:
    spec = HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml")
    return spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"constrain_calls": True})})


def _home_call(task, with_params: bool):
    """An item and one of its home's methods in a room, with or without parameters."""
    for item in task.load("dev"):
        for (room, device), methods in item.context.devices.items():
            if "." not in item.context.address(room, device):
                continue
            for method, params in methods.items():
                if bool(params) == with_params and len(device) > 3:
                    return item, (room, device, method, params)
    raise AssertionError("no such call in the dev homes")


@pytest.fixture
def case(home_data):
    """A harness with the constraint, a task, an item and one of its home's calls without arguments."""
    task = get_task("smart_home", home_data)
    spec = _constrained("smart_home_json")
    item, (room, device, method, _) = _home_call(task, with_params=False)
    return spec, task, item, repr(build_messages(spec, task, item)), (room, device, method)


def _run(spec, task, item, model):
    episodes = run_episodes(spec, task, model, [item])
    return episodes, summarize(episodes)


def test_an_invented_device_is_decoded_again_as_the_most_probable_allowed_one(case):
    spec, task, item, prompt, (room, device, method) = case
    model = TokenModel(prompt, [answer(room, "boilermaker", method), answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == "".join(answer(room, device, method)) and not turn.mismatch
    assert turn.free_output == "".join(answer(room, "boilermaker", method))  # what the model wrote, kept
    assert turn.constrained == 1 and stats["constrained_turns"] == 1 and stats["timr"] == 0.0
    assert model.ranked == [OPEN + room + "."]  # resumed at the name boundary before the divergence
    # without the constraint the invented name is a mismatch, and nothing is ranked
    free = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"constrain_calls": False})})
    model = TokenModel(prompt, model.answers)
    episodes, stats = _run(free, task, item, model)
    assert episodes[0].turns[0].mismatch_kind == "unknown tool" and stats["constrained_turns"] == 0
    assert model.ranked == []


def test_a_prefix_that_leads_nowhere_is_backed_off(case):
    """'heat' is a prefix of 'heating', but the model goes on with '.', and no token makes 'heat' allowed:
    the search returns to the point before it and takes the next allowed token."""
    spec, task, item, prompt, (room, device, method) = case
    model = TokenModel(prompt, [answer(room, device[:-2], method), answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == "".join(answer(room, device, method))
    assert stats["timr"] == 0.0 and stats["constrained_turns"] == 1
    # ranked once at the name boundary, once after "heat"; the first point's ranking is reused on the way back
    assert model.ranked == [OPEN + room + ".", OPEN + room + "." + device[:-2]]


def test_a_dead_end_at_the_models_own_boundary_backs_off_to_the_one_before(home_data):
    """The model writes `room.device.set_nothing`: after `set_` no ranked token leads to a method, so the
    search goes back to `room.device.`, where `set_` is known to lead nowhere and the next token is taken."""
    task = get_task("smart_home", home_data)
    spec = _constrained("smart_home_json")
    item, (room, device, method, _) = _home_call(task, with_params=False)
    assert any(m.startswith("set_") for m in item.context.devices[(room, device)]), "a device with a set_ method"
    prompt = repr(build_messages(spec, task, item))
    bad = [OPEN, room, ".", device, ".", "set_", "nothing", CLOSE]
    model = TokenModel(prompt, [bad, answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == "".join(answer(room, device, method)) and stats["timr"] == 0.0
    assert model.ranked == [OPEN + f"{room}.{device}.set_", OPEN + f"{room}.{device}."]


def test_a_name_astray_in_output_cut_off_by_the_token_limit_is_decoded_again(case):
    """A turn that never closes its answer (the model runs on with an invented device) does not parse; the
    invented name is found all the same and decoded again, and the model's own continuation closes it."""
    spec, task, item, prompt, (room, device, method) = case
    runaway = [OPEN, room, ".", "boilermaker", ".", method] + ['", "args": {}}, {"name": "' + room + ".boilermaker"] * 3
    model = TokenModel(prompt, [runaway, answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.free_output == "".join(runaway) and turn.output == "".join(answer(room, device, method))
    assert stats["timr"] == 0.0 and turn.constrained == 1
    # a name still allowed where the output is cut off was not invented: that turn stays a mismatch
    cut = [OPEN, room, ".", device[:2]]
    model = TokenModel(prompt, [cut, answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].mismatch_kind == "unparseable" and model.ranked == []


@pytest.mark.parametrize("interface", ["json", "xml"])
def test_an_answer_ends_where_its_interface_closes_it(home_data, interface):
    """The model closes its answer and writes on (a second answer): the turn is the first, as a decoder held
    to the interface's grammar would have stopped there; what the model wrote is kept."""
    task = get_task("smart_home", home_data)
    spec = _constrained(f"smart_home_{interface}")
    item, (room, device, method, _) = _home_call(task, with_params=False)
    render = get_interface(interface).render
    answer_text = render([Call(f"{room}.{device}.{method}")])
    model = TokenModel(repr(build_messages(spec, task, item)), [[answer_text, "\n" + render([Call("error_input")])]])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == answer_text and turn.free_output.startswith(answer_text + "\n")
    assert stats["timr"] == 0.0 and turn.constrained == 1 and model.ranked == []
    iface = get_interface(interface)
    assert iface.answer_end(" " + answer_text + "junk") == len(answer_text) + 1
    assert iface.answer_end(answer_text[:-3]) is None and iface.answer_end("Sure: " + answer_text) is None


@pytest.mark.parametrize("interface", ["json", "xml", "tool_call"])
def test_an_answer_that_runs_past_the_most_calls_a_request_needs_ends_after_them(home_data, interface):
    """A model that repeats calls until the token limit cuts it off: the answer ends after the task's
    `max_calls` whole calls (a schema's maxItems), a wrong answer rather than an unreadable one. With fewer
    whole calls than that the turn stays a mismatch: nothing says where the answer should have ended."""
    task = get_task("smart_home", home_data)
    spec = _constrained(f"smart_home_{interface}")
    item, (room, device, method, _) = _home_call(task, with_params=False)
    prompt, iface = repr(build_messages(spec, task, item)), get_interface(interface)
    calls = [Call(f"{room}.{device}.{method}"), Call("error_input")] * task.max_calls

    def cut_in_call(n):  # the answer of n calls, cut off inside its last one
        text = iface.render(calls[:n])
        return text[:iface.leading_calls(text)[-1][1] - 3]

    cut = cut_in_call(task.max_calls + 2)  # whole calls past max_calls
    model = TokenModel(prompt, [[cut]])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == iface.render(calls[:task.max_calls]) and turn.free_output == cut
    assert stats["timr"] == 0.0 and turn.constrained == 1 and model.ranked == []
    short = cut_in_call(task.max_calls)
    episodes, stats = _run(spec, task, item, TokenModel(prompt, [[short]]))
    assert episodes[0].turns[0].output == short and stats["timr"] == 1.0
    whole = iface.render(calls[:task.max_calls])  # exactly max_calls calls: nothing to mend
    episodes, stats = _run(spec, task, item, TokenModel(prompt, [[whole]]))
    assert episodes[0].turns[0].output == whole and stats["constrained_turns"] == 0


def test_a_call_that_is_not_one_is_decoded_again_from_its_name(case):
    """`{"mode": ...}` where a call's name belongs (the format parsed, its schema did not): the calls before it
    are kept, and the model is taken to where the next name starts, which it writes under the constraint."""
    spec, task, item, prompt, (room, device, method) = case
    good = answer(room, device, method)
    model = TokenModel(prompt, [['[{"mode": "error_input", "args": {}}]'], good])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == "".join(good) and turn.constrained == 1 and stats["timr"] == 0.0
    assert model.ranked == [OPEN]
    before = '[{"name": "error_input", "args": {}}, {"name": "'
    two = ['[{"name": "error_input", "args": {}}, ', '{"name": "', room, ".", device, ".", method, CLOSE]
    model = TokenModel(prompt, [['[{"name": "error_input", "args": {}}, {"mode": 1}]'], two])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == "".join(two) and stats["timr"] == 0.0 and model.ranked == [before]
    # an empty answer is no answer: a call is asked for
    model = TokenModel(prompt, [["[]"], good])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == "".join(good) and stats["timr"] == 0.0


@pytest.mark.parametrize("interface", ["json", "xml", "tool_call"])
def test_the_name_opener_finds_each_call_name_in_the_interfaces_output(interface):
    text = get_interface(interface).render([Call("kitchen.light.turn_on"), Call("oven.set_mode", {"mode": 1})])
    found = [text[m.end():m.end() + 7] for m in name_opener(interface).finditer(text)]
    assert found == ["kitchen", "oven.se"]
    spaced = text.replace("><", ">\n  <").replace('": "', '":"')  # as a model may space it
    assert len(list(name_opener(interface).finditer(spaced))) == 2


def test_a_name_no_ranked_token_keeps_allowed_stays_a_mismatch(case):
    spec, task, item, prompt, (room, device, method) = case
    model = TokenModel(prompt, [answer(room, "boilermaker", method)])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == "".join(answer(room, "boilermaker", method))
    assert turn.mismatch_kind == "unknown tool" and turn.constrained == 0 and stats["timr"] == 1.0


def test_every_name_of_a_turn_is_kept_to_the_tools_and_recorded(case):
    spec, task, item, prompt, (room, device, method) = case

    def calls(first, second):
        return answer(room, first, method)[:-1] + ['", "args": {}}, {"name": "'] + answer(room, second, method)[1:]

    model = TokenModel(prompt, [calls("fridge", "oven"), calls(device, "oven"), calls(device, device)])
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == "".join(calls(device, device)) and not turn.mismatch
    assert turn.constrained == 2 and stats["constrained_turns"] == 1
    assert episode_rows(episodes)[1][0]["constrained"] == 2


class RunawayModel(TokenModel):
    """A TokenModel whose every continuation runs to the token limit, as a model repeating itself does."""

    generations = 0

    def generate(self, prompts, **kw):
        self.generations += len(prompts)
        return [(text, kw["max_new_tokens"]) for text, _ in super().generate(prompts, **kw)]


def test_the_mends_of_a_turn_share_a_budget_of_new_tokens(case):
    """Three invented devices, each mended by a continuation: with short continuations all three are mended;
    when each runs to the token limit, the budget (RESUME_BUDGET turns' worth) pays for two, and the turn is
    left with the third, as the model wrote it."""
    spec, task, item, prompt, (room, device, method) = case
    assert RESUME_BUDGET == 2

    def calls(*devices):
        tokens = [OPEN]
        for d in devices:
            tokens += [room, ".", d, ".", method, '", "args": {}}, {"name": "']
        return tokens[:-1] + [CLOSE]

    invented = ["boilermaker", "fridgemaker", "ovenmaker"]
    answers = [calls(*[device] * i, *invented[i:]) for i in range(4)]
    episodes, _ = _run(spec, task, item, TokenModel(prompt, answers))
    turn = episodes[0].turns[0]
    assert turn.output == "".join(answers[3]) and turn.constrained == 3 and not turn.mismatch
    model = RunawayModel(prompt, answers)
    episodes, stats = _run(spec, task, item, model)
    turn = episodes[0].turns[0]
    assert turn.output == "".join(answers[2]) and turn.constrained == 2
    assert turn.mismatch_kind == "unknown tool" and stats["timr"] == 1.0
    assert model.generations == 3  # the turn and two mends: the third mend's continuation could not be paid


def test_the_archive_keeps_a_mended_turn_and_what_the_model_wrote(case, archive):
    spec, task, item, prompt, (room, device, method) = case
    model = TokenModel(prompt, [answer(room, "boilermaker", method), answer(room, device, method)])
    episodes, stats = _run(spec, task, item, model)
    hid = archive.add_harness(spec.to_dict(), creator="seed")
    cid = archive.add_checkpoint(name="m", path="/nonexistent/m", kind="base")
    eid = archive.add_evaluation(dict(harness_id=hid, checkpoint_id=cid, task="smart_home", split="dev", score=1.0,
                                      metrics={}, seconds=1.0, **stats), *episode_rows(episodes))
    assert archive.evaluation(eid)["constrained_turns"] == 1
    [turn] = archive.turns(eid)
    assert turn["constrained"] == 1 and turn["mismatch"] == 0
    assert turn["free_output"] == "".join(answer(room, "boilermaker", method))


@pytest.mark.parametrize("interface", ["json", "xml", "tool_call"])
def test_a_missing_argument_is_asked_for_and_an_extra_one_dropped(home_data, interface):
    task = get_task("smart_home", home_data)
    spec = _constrained(f"smart_home_{interface}")
    render = get_interface(interface).render
    # a call without its argument: the model is taken to where the value starts, and writes it
    item, (room, device, method, params) = _home_call(task, with_params=True)
    name, prompt = f"{room}.{device}.{method}", repr(build_messages(spec, task, item))
    good = render([Call(name, {params[0]: 40})])
    model = TokenModel(prompt, [[render([Call(name, {})])], [good]])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == good and stats["timr"] == 0.0 and stats["constrained_turns"] == 1
    assert model.ranked == []  # argument names need no ranked tokens
    # after a sound call, an argument that a method without parameters does not take: rendered without it
    item, (room, device, method, _) = _home_call(task, with_params=False)
    name, prompt = f"{room}.{device}.{method}", repr(build_messages(spec, task, item))
    sound = Call("error_input")
    fixed = render([sound, Call(name, {})])
    model = TokenModel(prompt, [[render([sound, Call(name, {"level": 3})])], [fixed]])
    episodes, stats = _run(spec, task, item, model)
    assert episodes[0].turns[0].output == fixed and episodes[0].turns[0].constrained == 1 and stats["timr"] == 0.0


def test_a_backend_that_ranks_no_tokens_cannot_run_a_constrained_harness(case):
    spec, task, item, prompt, _ = case

    class Plain:
        label = "openai:served"

        def chat_prompt(self, messages):
            return prompt

        def generate(self, prompts, **kw):
            return [("[]", 1) for _ in prompts]

    with pytest.raises(CoevoError, match=r"constrain_calls.*openai:served"):
        run_episodes(spec, task, Plain(), [item])


def test_name_set_reads_text_as_open_closed_or_astray():
    names = NameSet(["kitchen.light.turn_on", "kitchen.light.turn_off", "error_input"])
    assert names.advance("kitchen.li", "ght.turn") == (8, "open")
    assert names.advance("kitchen.light.turn_on", '", "args"') == (1, "closed")
    assert names.advance("kitchen.light.turn", '", ') == (0, "astray")  # ends where no name does
    assert names.advance("kitchen.", "oven") == (0, "astray")
    assert names.advance("", "error_input]") == (12, "closed")


def test_each_task_names_the_tools_of_its_items(home_data):
    task = get_task("smart_home", home_data)
    item = task.load("dev")[0]
    names = task.call_names(item)
    assert "error_input" in names and len(names) == 1 + sum(len(m) for m in item.context.devices.values())
    assert all(task.check_call(_call(n, item), item) is None for n in names if n != "error_input")


def _call(name, item):
    room, device, method = split_name(name)
    return Call(name, {p: 1 for p in item.context.devices[(room, device)][method]})


@pytest.mark.parametrize("task_name, values", [
    ("rbac_sql", {"query": "SELECT name FROM employees"}),
    ("failure_attribution", {"agent": "WebSurfer", "step": 3, "part": "first"})])
def test_each_tool_with_the_argument_names_it_is_given_passes_the_check(task_name, values, tmp_path):
    task, item = get_task(task_name, tmp_path), Item("1", "", None, "x")
    for name in task.call_names(item):
        args = task.arg_names(item, name)
        if args is not None:
            assert task.check_call(Call(name, {a: values[a] for a in args}), item) is None, name
    assert task.arg_names(item, "no_such_tool") is None


def test_rejection_sampling_mends_calls_only_when_asked(home_data, tmp_path):
    from engine.evolve.sampling import rejection_sample
    from engine.jsonl import read_jsonl
    task, spec = get_task("smart_home", home_data), _constrained("smart_home_json")
    item = next(i for i in task.load("train") if len(task.gold_calls(i)) == 1 and not task.gold_calls(i)[0].args
                and task.gold_calls(i)[0].name.count(".") == 2)
    room, device, method = split_name(task.gold_calls(item)[0].name)
    prompt = repr(build_messages(spec, task, item))
    for constrain, kept in ((False, 0), (True, 1)):
        model = TokenModel(prompt, [answer(room, "boilermaker", method), answer(room, device, method)])
        counts = rejection_sample(spec, task, model, [item], k=1, temperature=0.0, out_path=tmp_path / "d.jsonl",
                                  constrain=constrain)
        assert counts["kept"] == kept and bool(model.ranked) == constrain
    [(_, row)] = read_jsonl(tmp_path / "d.jsonl")
    assert row["messages"][-1]["content"] == "".join(answer(room, device, method))
