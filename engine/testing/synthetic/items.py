"""The task items a synthetic archive's episodes are about, made by the real engine: each task's own
`generate` writes a small data set, the task's gold turns are played through the rollout runtime by a
scripted backend (so every action, environment feedback and reward is the task's own), and every broken
output a synthetic turn may show is refused by the real judge with its real reason."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

from engine import ASSETS
from engine.harness.interfaces import Call, get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import build_messages, judge, run_episodes
from engine.tasks import get_task
from engine.testing.scripted import ScriptedBackend, tokens

IFACES = ("json", "xml", "tool_call")  # index order used by the affinity vectors
ITEMS_PER_SPLIT = 48                    # distinct task items per (task, split): few, so pools are cheap to build
USER_PREFIXES = ("", "Instruction: ", "Request: ")  # the first turn's prompt, per instruction variant
# task options the offline editor can choose, set here so that some episodes take several turns
OPTIONS = {"failure_attribution": {"protocol": "binary_search", "window": 4}}


@dataclass
class Step:
    """One valid turn of a scripted episode, with the ways a model could have broken it."""
    outputs: list          # per interface index: (output, tokens)
    action: str            # the parsed calls, as turns.action stores them
    feedback: str          # what the environment answered
    reward: float
    mismatch: list         # per interface index * 2 + strict: (wrong format {iface: (out, err, tok)}, garbage)


@dataclass
class Path:
    """An episode's answers from start to end, as the task's environment played them."""
    steps: list[Step]
    success: bool
    prediction: str | None  # episodes.prediction


@dataclass
class Item:
    id: str
    input: str
    category: int           # index into its pool's categories
    prompts: list           # the first turn's prompt, per instruction variant
    gold: Path
    wrong: Path             # a well-formed answer the task judges wrong


@dataclass
class Pool:
    items: list[Item]
    categories: list[str]


def seed_specs(task: str) -> list[HarnessSpec]:
    """The task's seed harness per interface, all with one set of task options (one protocol)."""
    specs = [HarnessSpec.load(ASSETS / "harnesses" / f"{task}_{i}.yaml") for i in IFACES]
    options = {**specs[0].task_options, **OPTIONS.get(task, {})}
    return [s.model_copy(update={"task_options": options}) for s in specs]


def build_pools(tasks, splits, seed: int, data_root) -> dict[tuple[str, str], Pool]:
    """A small pool of items per task and split, from data generated under data_root/<task>."""
    pools = {}
    for name in tasks:
        task = get_task(name, data_root / name)
        if not all(task.has_split(s) for s in splits):
            type(task).generate(task.data_dir, seed=seed, sizes={s: ITEMS_PER_SPLIT for s in splits})
        specs = seed_specs(name)
        for split in splits:
            items = task.load(split, limit=ITEMS_PER_SPLIT)
            categories = sorted({i.category for i in items})
            gold = {i.id: task.gold_turns(i, specs[0].task_options) for i in items}
            played = _play(task, specs, items, gold)
            failed = [i.id for i in items if not played[i.id][0].success]
            if failed:
                raise AssertionError(f"{name}/{split}: the task judges its own gold answers wrong for {failed[:5]}")
            wrong = _wrong_answers(task, specs, items, gold, random.Random(f"{seed}-wrong-{name}-{split}"))
            pools[name, split] = Pool([
                Item(i.id, i.input, categories.index(i.category), [p + i.input for p in USER_PREFIXES],
                     _path(task, specs, i, played[i.id]), _path(task, specs, i, wrong[i.id]))
                for i in items], categories)
    return pools


def _play(task, specs, items, answers: dict[str, list[list[Call]]]) -> dict[str, list]:
    """Each item's episode under every interface, the model's answers scripted: {item: [episode per iface]}."""
    out = {i.id: [] for i in items}
    for spec in specs:
        iface = get_interface(spec.interface.name)
        backend = ScriptedBackend(opening=len(build_messages(spec, task, items[0])))
        for item in items:
            backend.add(build_messages(spec, task, item), [iface.render(c) for c in answers[item.id]])
        for item, episode in zip(items, run_episodes(spec, task, backend, items)):
            out[item.id].append(episode)
    for item in items:
        first = out[item.id][0]
        if any(t.mismatch for e in out[item.id] for t in e.turns):
            raise AssertionError(f"{task.name} item {item.id}: the judge refuses a rendered scripted answer")
        if any([t.action for t in e.turns] != [t.action for t in first.turns] for e in out[item.id]):
            raise AssertionError(f"{task.name} item {item.id}: the interfaces disagree on the parsed calls")
    return out


def _wrong_answers(task, specs, items, gold, rng) -> dict[str, list]:
    """For each item, another item's gold answers played here: well formed, and judged wrong by the task."""
    found: dict[str, list] = {}
    for _ in range(8):  # a few draws cover every item
        todo = [i for i in items if i.id not in found]
        if not todo or len(items) < 2:
            break
        donors = {i.id: rng.choice([d for d in items if d.id != i.id]) for i in todo}
        played = _play(task, specs, todo, {i.id: gold[donors[i.id].id] for i in todo})
        found.update({i.id: played[i.id] for i in todo if not played[i.id][0].success})
    missing = [i.id for i in items if i.id not in found]
    if missing:
        raise AssertionError(f"{task.name}: no wrong answer found for items {missing[:5]}")
    return found


def _path(task, specs, item, episodes) -> Path:
    """A Path from the item's episode under each interface (the same calls, rendered differently)."""
    first = episodes[0]
    steps = []
    for t_no, turn in enumerate(first.turns):
        calls = [Call(c["name"], c.get("args", {})) for c in turn.action]
        outputs = [(e.turns[t_no].output, e.turns[t_no].tokens) for e in episodes]
        steps.append(Step(outputs, json.dumps(turn.action, separators=(",", ":")), turn.feedback, turn.reward,
                          _mismatches(task, specs, item, calls, [o for o, _ in outputs])))
    prediction = json.dumps(first.prediction) if first.prediction is not None else None
    return Path(steps, first.success, prediction)


def _mismatches(task, specs, item, calls: list[Call], outputs: list[str]) -> list:
    """Per (interface, strictness): the other interfaces' renderings and some typical garbage, each with
    the judge's reason for refusing it; outputs the judge would accept are left out."""
    name = calls[0].name if calls else "answer"
    mangled = [Call(name.replace(".", "_", 1) if "." in name else name + "_tool", calls[0].args if calls else {})]
    out = []
    for i, spec in enumerate(specs):
        own = outputs[i]
        garbage_src = [own[: max(4, len(own) * 3 // 5)],                 # cut off mid-answer
                       "Sure:\n" + own,                                    # prose around the answer
                       "```\n" + own + "\n```",                           # a code fence
                       get_interface(spec.interface.name).render(mangled + calls[1:]),  # an unknown tool
                       "I cannot answer that with the tools I have."]    # no answer at all
        for strict in (False, True):
            s = spec.model_copy(update={"strict": strict})
            wrong_format = {j: (outputs[j], v[1], v[2], tokens(outputs[j])) for j in range(len(specs)) if j != i
                            if (v := judge(s, task, item, outputs[j]))[1]}
            garbage = [(g, v[1], v[2], tokens(g)) for g in garbage_src if (v := judge(s, task, item, g))[1]]
            out.append((wrong_format, garbage))
    return out
