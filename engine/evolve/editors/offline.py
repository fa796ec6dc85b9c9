"""Offline mutation operators on a harness spec; each edit says what it changed and why."""
from __future__ import annotations

import json
import random

import yaml

from engine import ASSETS
from engine.evolve.editors import EDITORS, Edit
from engine.harness.interfaces import INTERFACES


def _instructions(task: str) -> list[str]:
    path = ASSETS / "instructions" / f"{task}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else []


def change_task_option(spec: dict, rng, successes, fixed=()) -> Edit | None:
    """Change how the harness presents its task: one of the task's declared options that is not fixed."""
    from engine.tasks import task_class
    task = task_class(spec["task"])
    current = spec.get("task_options", {})
    in_force = task.options_in_force(current)
    choices = [(k, v) for k, values in task.option_space.items() if k not in fixed
               for v in values if in_force.get(k) != v]
    if not choices:
        return None
    key, value = rng.choice(choices)
    return Edit({**spec, "task_options": {**current, key: value}}, f"task option {key} -> {value}",
                "change_task_option")


def switch_interface(spec: dict, rng, successes, fixed=()) -> Edit | None:
    others = [n for n in INTERFACES.names() if n != spec["interface"]["name"]]
    new = rng.choice(others)
    return Edit({**spec, "interface": {"name": new}},
                f"switch the output interface {spec['interface']['name']} -> {new}", "switch_interface")


def add_few_shot(spec: dict, rng, successes, fixed=()) -> Edit | None:
    have = {s["input"] for s in spec["few_shot"]}
    pool = [s for s in successes if s["input"] not in have]
    if not pool or len(spec["few_shot"]) >= 3:
        return None
    pick = rng.choice(pool)
    shot = {"input": pick["input"], "calls": json.loads(pick["action"])}
    return Edit({**spec, "few_shot": spec["few_shot"] + [shot]},
                f"add an archived success as a few-shot example: {pick['input']!r}", "add_few_shot")


def remove_few_shot(spec: dict, rng, successes, fixed=()) -> Edit | None:
    if not spec["few_shot"]:
        return None
    i = rng.randrange(len(spec["few_shot"]))
    return Edit({**spec, "few_shot": spec["few_shot"][:i] + spec["few_shot"][i + 1:]},
                f"remove few-shot example {i}", "remove_few_shot")


def replace_few_shot(spec: dict, rng, successes, fixed=()) -> Edit | None:
    removed = remove_few_shot(spec, rng, successes)
    added = removed and add_few_shot(removed.spec, rng, successes)
    if not added:
        return None
    return Edit(added.spec, "replace a few-shot example with another archived success", "replace_few_shot")


def rewrite_instruction(spec: dict, rng, successes, fixed=()) -> Edit | None:
    options = [t for t in _instructions(spec["task"]) if t != spec["system_prompt"]]
    if not options:
        return None
    i = rng.randrange(len(options))
    return Edit({**spec, "system_prompt": options[i]}, f"rewrite the instruction (library entry {i})",
                "rewrite_instruction")


def toggle_strictness(spec: dict, rng, successes, fixed=()) -> Edit | None:
    strict = not spec["strict"]
    return Edit({**spec, "strict": strict}, f"parser strictness -> {'strict' if strict else 'lenient'}",
                "toggle_strictness")


def retry_on_parse_error(spec: dict, rng, successes, fixed=()) -> Edit | None:
    loop = spec["loop"]
    if loop["retry_on_parse_error"]:
        return Edit({**spec, "loop": {**loop, "retry_on_parse_error": False}},
                    "drop the retry turn on parse errors", "retry_on_parse_error")
    return Edit({**spec, "loop": {**loop, "retry_on_parse_error": True, "max_turns": max(2, loop["max_turns"])}},
                "add a retry turn on parse errors", "retry_on_parse_error")


def constrain_calls(spec: dict, rng, successes, fixed=()) -> Edit | None:
    """Only ever turned on: a call outside the tools fails its turn, so the constraint seldom costs a success."""
    sampling = spec["sampling"]
    if sampling.get("constrain_calls"):
        return None
    return Edit({**spec, "sampling": {**sampling, "constrain_calls": True}},
                "decode calls under the task's tools", "constrain_calls")


OPERATORS = [switch_interface, add_few_shot, remove_few_shot, replace_few_shot, rewrite_instruction,
             toggle_strictness, retry_on_parse_error, change_task_option, constrain_calls]

# What each fault calls for: output that does not parse calls for a different format or a forgiving
# parser; calls outside the schema (unknown tool, wrong arguments) and wrong answers call for showing
# the task better (context, examples, instruction).
FORMAT_OPERATORS = {"switch_interface", "toggle_strictness", "retry_on_parse_error"}
FORMAT_FAULTS = {"unparseable"}
FAVOURED = 4.0  # weight of an operator that addresses the parent's main fault, against 1


def diagnose(scores: dict) -> str | None:
    """The parent's main fault from its best evaluation: 'format', 'content' or None when unknown."""
    kinds = scores.get("mismatch_kinds") or {}
    if "score" not in scores:
        return None
    fmt = sum(n for k, n in kinds.items() if k in FORMAT_FAULTS)
    return "format" if fmt and fmt * 2 >= sum(kinds.values()) else "content"


def operator_order(rng: random.Random, fault: str | None) -> list:
    """Every operator once, drawn by weight without replacement (uniform when the fault is unknown)."""
    ops = list(OPERATORS)
    if fault is None:
        rng.shuffle(ops)
        return ops
    favoured = (lambda op: (op.__name__ in FORMAT_OPERATORS) == (fault == "format"))
    # weighted order without replacement: sort by u ** (1 / w) (Efraimidis & Spirakis)
    return sorted(ops, key=lambda op: rng.random() ** (1 / (FAVOURED if favoured(op) else 1.0)), reverse=True)


@EDITORS.register("offline")
def offline_edit(parent: dict, *, rng: random.Random, successes: list[dict], scores: dict | None = None,
                 fixed_task_options=(), **_) -> Edit:
    """Apply one applicable operator, chosen with the seeded generator, favouring those that address
    the parent's main fault; task options named in `fixed_task_options` are never changed."""
    spec = json.loads(json.dumps(parent["spec"]))
    fault = diagnose(scores or {})
    for op in operator_order(rng, fault):
        edit = op(spec, rng, successes, fixed_task_options)
        if edit is not None and edit.spec != parent["spec"]:
            if fault:
                edit.rationale += f" (the parent's main fault: {fault})"
            return edit
    raise RuntimeError("no operator applies")  # unreachable: switch_interface always applies
