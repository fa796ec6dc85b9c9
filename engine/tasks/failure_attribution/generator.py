"""A seeded generator of failed multi-agent traces in the Who&When file format, each with one injected
decisive error, small enough for a tiny model's context (5-9 steps, each under 120 characters).

Every trace is a team answering a question about two fictional towns: a planner states the plan, a
searcher looks both numbers up, a coder computes the answer, a terminal runs the code and a checker
gives the final answer. One step goes wrong and every later step builds on it, so the first step
that contradicts the question or an earlier step is the decisive error:
- wrong_tool_arguments: the searcher searches for a town or an attribute the question did not ask;
- hallucinated_fact: a number that no earlier step reported (the coder's code, the planner's hand-off,
  or the checker's final answer against the terminal's output);
- ignored_instruction: the plan or the code uses the other operation than the question (or the plan) asks;
- premature_termination: an agent gives the final answer before the second number was looked up.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

TOWNS = ["Alder", "Brookfield", "Cedar Bay", "Dunmore", "Elmstead", "Fenwick", "Glenrock", "Harrow",
         "Ivydale", "Juniper", "Kestrel", "Larchmont", "Millbrook", "Northwick", "Oakhurst", "Pinecrest"]
ATTRIBUTES = ["parks", "libraries", "bridges", "schools", "museums", "bus routes", "fire stations", "clinics"]
# agent names per role: one is drawn per trace, so a name never plays two roles. One word each: a tiny
# model's tokenizer learns each as one or two tokens, so naming the culprit is a short copy
TEAM = {
    "planner": ["Orchestrator", "Planner", "Manager"],
    "searcher": ["WebSurfer", "Researcher", "Browser"],
    "coder": ["Coder", "Programmer", "Analyst"],
    "terminal": ["ComputerTerminal", "Terminal"],
    "checker": ["Assistant", "Verifier", "Reviewer"],
}
KINDS = ["wrong_tool_arguments", "hallucinated_fact", "ignored_instruction", "premature_termination"]
OPS = {"sum": ("+", "the total", lambda a, b: a + b), "difference": ("-", "the difference", lambda a, b: a - b)}
QUESTIONS = {
    "sum": ["How many {attr} do {a} and {b} have in total?", "What is the total number of {attr} in {a} and {b}?"],
    "difference": ["How many more {attr} does {a} have than {b}?", "By how many {attr} does {a} exceed {b}?"],
}


def _other(rng: random.Random, pool: list, *avoid):
    return rng.choice([x for x in pool if x not in avoid])


def _near(rng: random.Random, value: int, *avoid: int) -> int:
    """A plausible wrong number: close to value, positive, and none of avoid."""
    while True:
        v = value + rng.choice([-1, 1]) * rng.randint(2, 40)
        if v > 0 and v != value and v not in avoid:
            return v


def make_trace(rng: random.Random, n: int, kind: str | None = None) -> dict:
    """One failed trace as a Who&When record (plus `mistake_kind`, which the format does not have)."""
    kind = kind or rng.choice(KINDS)
    names = {role: rng.choice(pool) for role, pool in TEAM.items()}
    P, S, C, T, K = (names[r] for r in ("planner", "searcher", "coder", "terminal", "checker"))
    op = rng.choice(sorted(OPS))
    town_a, town_b = rng.sample(TOWNS, 2)
    attr = rng.choice(ATTRIBUTES)
    va = rng.randint(20, 400)
    vb = rng.randint(3, va - 2) if op == "difference" else _near(rng, va)  # a difference stays positive
    _, op_words, fn = OPS[op]
    question = rng.choice(QUESTIONS[op]).format(attr=attr, a=town_a, b=town_b)
    truth = fn(va, vb)

    # which role errs depends on the kind; blame() below marks the step it is about to write
    culprit = {"wrong_tool_arguments": "searcher", "premature_termination": rng.choice(["checker", "planner"]),
               "hallucinated_fact": rng.choice(["coder", "checker", "planner"]),
               "ignored_instruction": rng.choice(["coder", "planner"])}[kind]
    lookups_split = [rng.random() < 0.7, rng.random() < 0.7]  # search and result as one step or two
    relay = (culprit == "planner" and kind == "hallucinated_fact") or rng.random() < 0.4
    steps: list[tuple[str, str, str]] = []
    mistake: tuple[int, str, str] | None = None

    def say(agent, text, role="assistant"):
        steps.append((agent, role, text))

    def blame(agent, reason):
        nonlocal mistake
        mistake = (len(steps), agent, reason)

    plan_op, plan_words = op, op_words
    if kind == "ignored_instruction" and culprit == "planner":
        plan_op = "difference" if op == "sum" else "sum"
        plan_words = OPS[plan_op][1]
        blame(P, f"The plan asks for {plan_words} although the question asks for {op_words}.")
    say(P, f"Plan: {S} finds {attr} in {town_a} and {town_b}, then {C} computes {plan_words}.")

    # the two look-ups; a wrong search looks up another town or attribute and reports its number
    values = []
    wrong_lookup = rng.randrange(2) if kind == "wrong_tool_arguments" else None
    for i, (town, value) in enumerate([(town_a, va), (town_b, vb)]):
        q_town, q_attr = town, attr
        if i == wrong_lookup:
            if rng.random() < 0.5:
                q_town = _other(rng, TOWNS, town_a, town_b)
                reason = f"{S} searched for {q_town}, a town the question does not ask about."
            else:
                q_attr = _other(rng, ATTRIBUTES, attr)
                reason = f"{S} searched for {q_attr} although the question asks about {attr}."
            value = _near(rng, value, *values)
            blame(S, reason)
        query = f'search("{q_attr} in {q_town}")'
        found = f"{q_town} has {value} {q_attr}."
        if i == 1 and kind == "premature_termination":
            # the answer comes while the second number is still being looked up
            who = K if culprit == "checker" else P
            say(P, f"Progress: {town_a} done. {S}, now find the {attr} of {town_b}.")
            say(S, query)
            blame(who, f"{who} gave the final answer before the {attr} of {town_b} was found.")
            say(who, f"We have enough. Final answer: {values[0]}. TERMINATE")
            return _record(n, question, truth, steps, mistake, kind)
        if lookups_split[i]:
            say(S, query)
            say(S, f"Result: {found}")
        else:
            say(S, f"{query} -> {found}")
        values.append(value)

    a, b = values
    code_op = plan_op
    if relay:
        ra = a
        if kind == "hallucinated_fact" and culprit == "planner":
            ra = _near(rng, a, b)
            blame(P, f"{P} passed on {ra} for {town_a}, but {S} found {a}.")
        say(P, f"{C}, compute {OPS[plan_op][1]} of {ra} and {b}.")
        a = ra
    if kind == "hallucinated_fact" and culprit == "coder":
        wrong = _near(rng, b, a)
        blame(C, f"{C} used {wrong} for {town_b}, but {S} found {b}.")
        b = wrong
    if kind == "ignored_instruction" and culprit == "coder":
        code_op = "difference" if plan_op == "sum" else "sum"
        blame(C, f"{C} computed {OPS[code_op][1]}, but the plan asks for {OPS[plan_op][1]}.")
    result = OPS[code_op][2](a, b)
    say(C, f"```python\nprint({a} {OPS[code_op][0]} {b})\n```")
    say(T, f"exitcode: 0 (execution succeeded)\nCode output: {result}", role="user")
    final = result
    if kind == "hallucinated_fact" and culprit == "checker":
        final = _near(rng, result, truth)
        blame(K, f"{K} reported {final}, but the code printed {result}.")
    say(K, f"Checked the numbers. Final answer: {final}. TERMINATE")
    return _record(n, question, truth, steps, mistake, kind)


def _record(n, question, truth, steps, mistake, kind) -> dict:
    assert mistake is not None, kind
    step, agent, reason = mistake
    return {"is_correct": False, "question": question, "question_ID": f"synthetic-{n}", "level": "1",
            "ground_truth": str(truth),
            "history": [{"content": c, "role": r, "name": a} for a, r, c in steps],
            "mistake_agent": agent, "mistake_step": str(step), "mistake_reason": reason, "mistake_kind": kind}


def write_dataset(out_dir, *, seed: int, sizes: dict[str, int]) -> None:
    """`<out>/<split>/<n>.json`, n counting on across splits so ids are unique; the same seed gives
    the same files. Each split folder is replaced whole, so no file of an earlier, larger run stays."""
    out = Path(out_dir)
    rng = random.Random(seed)
    n = 0
    for split, size in sizes.items():
        tmp = out / f".{split}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for _ in range(size):
            rec = make_trace(rng, n)
            (tmp / f"{n}.json").write_text(json.dumps(rec, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            n += 1
        final = out / split
        if final.exists():
            old = out / f".{split}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)
