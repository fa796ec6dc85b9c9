"""A fast generator of realistic synthetic archives, for dashboard benchmarks and tests.

The archive is created through `Archive(path)` so that the real schema and its migrations apply, then
filled with a raw sqlite3 connection: executemany over generators, one transaction per chunk and
synchronous=OFF while building, which is what makes five million turns take minutes rather than hours.

What the rows model: harnesses evolve from the three seed YAMLs by small edits (so parent/child diffs
mean something), checkpoints are fine-tuned under a harness and sometimes TIES-merged, and every
evaluation's mismatch rate follows the agreement between the harness's output interface and the
interfaces the checkpoint was trained under: a checkpoint trained under XML answers a JSON harness in
XML, and those turns are mismatches. Counts are consistent across tables: an evaluation's turns and
mismatched turns are the sums over its turn rows, an episode's over its own.

Everything random comes from generators seeded by `seed`, and timestamps from a fixed clock, so the
same arguments give the same file content.
"""
from __future__ import annotations

import json
import math
import random
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from engine import ASSETS
from engine.archive.store import Archive, spec_hash
from engine.harness.interfaces import Call, ParseError, get_interface
from engine.harness.spec import HarnessSpec
from engine.tasks.smart_home.catalog import DEVICES

IFACES = ("json", "xml", "tool_call")              # index order used by the affinity vectors
SEED_FILES = ("smart_home_json", "smart_home_xml", "smart_home_tool_call")  # h1, h2, h3
STEPS = ("curate", "edit", "inherit", "sample", "sft", "evaluate")  # as in engine.evolve.rounds
ITEMS_PER_SPLIT = 48        # distinct task items per (task, split): few, so pools are cheap to render
EVAL_CONFIG = json.dumps({"limit": None, "backend": "transformers", "data_dir": None})
EVAL_CHUNK = 1000           # evaluations (with their episodes and turns) per transaction
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
ROUND_SPAN = timedelta(hours=2)
# when, in seconds into its round, each step finishes; the rows a step writes are timed before it
STEP_AT = {"curate": 600, "edit": 1500, "inherit": 2000, "sample": 2900, "sft": 3100, "evaluate": 7000}

RETRY = "Your answer could not be parsed ({error}). Answer again in the required format."
PEOPLE = ("alice", "bob", "chen")
APPROVE_COMMENTS = ("looks right", "ok, the probe agrees", "fine by me", None)
OVERRIDE_COMMENTS = ("prefer the xml lineage", "the chosen one regressed on test", "keep the tool_call branch alive",
                     "too many children already")
LLM_NOTES = ("Answer with the calls only, no prose.", "Never wrap the answer in a code fence.",
             "Use exactly the device names listed above.", "One call per operation, in the order given.")


# -- clock -----------------------------------------------------------------------------------------
def _at(round_no: int | None, seconds: float) -> str:
    """A deterministic timestamp: round r happens in its own two-hour window after T0."""
    t = T0 + (round_no or 0) * ROUND_SPAN + timedelta(seconds=seconds)
    return t.isoformat(timespec="milliseconds")


# -- task items: what episodes are about --------------------------------------------------------------
@dataclass
class Calls:
    """One model answer (a list of calls), pre-rendered in every interface, valid and broken."""
    valid: list          # per interface index: (output, tokens)
    action: str          # the parsed action as stored in turns.action
    feedback: str        # what the environment answers
    prediction: str      # what an episode ending on this answer predicts (episodes.prediction)
    mismatch: list       # per (interface index * 2 + strict): (wrong-format by interface index, garbage list)


@dataclass
class Item:
    id: str
    input: str
    category: int        # index into the task's categories
    prompts: list        # the first turn's prompt, per instruction variant
    probes: list         # intermediate, information-gathering answers (Calls), one per turn before the last
    final: Calls         # the right answer
    wrong: Calls         # a well-formed wrong answer


ROOMS = ("living_room", "bedroom", "kitchen", "study_room", "bathroom", "guest_bedroom", "balcony")
AGENTS = ("Orchestrator", "WebSurfer", "Coder", "FileSurfer", "Planner", "Verifier")
EVENTS = ("clicked a stale link", "misread the table", "ran the wrong script", "skipped the check",
          "hallucinated a file name", "looped on the same page")
ROLES = ("analyst", "hr_manager", "intern", "auditor", "support", "admin")
TABLES = ("payroll", "customers", "orders", "audit_log", "employees", "tickets")
PRIVS = ("SELECT", "INSERT", "UPDATE", "DELETE")
# the user line per instruction variant. A turn's prompt keeps only the newest message of the chat (the
# system prompt, the context and the history would multiply the file size and show nothing new)
USER_PREFIXES = ("", "Instruction: ", "Request: ")
CATEGORIES = {"smart_home": ("VS", "IS", "VM", "IM", "MM"), "failure_attribution": ("hand", "algo"),
              "rbac_sql": ("direct", "inherited")}
TASK_DIFFICULTY = {"smart_home": 1.0, "failure_attribution": 0.6, "rbac_sql": 0.8}


def _ops(calls: list[Call]) -> list[str]:
    return [f"{c.name}({','.join(str(v) for v in c.args.values())})" for c in calls]


def _smart_home_item(rng: random.Random, n: int):
    """(input, category, probes [(calls, feedback)], final calls, wrong calls) for a smart-home instruction."""
    def clause():
        room = rng.choice(ROOMS)
        dev = rng.choice([d for d in DEVICES if d != "vacuum_robot"])
        method = rng.choice(sorted(DEVICES[dev]))
        params = DEVICES[dev][method]
        args = {p: (rng.randint(1, 30) if t == "int" else rng.choice(["auto", "low", "high", "sleep"]))
                for p, t in params if not t.startswith("typing")}
        where = f"the {dev.replace('_', ' ')} in the {room.replace('_', ' ')}"
        if args:
            param, value = next(iter(args.items()))
            spoken = f"set the {param.replace('_', ' ')} of {where} to {value}"
        else:
            spoken = f"{method.replace('set_', '').replace('_', ' ')} {where}"
        return spoken, Call(f"{room}.{dev}.{method}", args), room, dev

    # HomeBench's categories: valid/invalid single (VS, IS), valid/invalid/mixed multi (VM, IM, MM)
    kind = rng.choices(range(5), weights=(35, 25, 15, 10, 15))[0]
    text, call, room, dev = clause()
    calls = [call]
    if kind >= 2:
        text2, call2, _, _ = clause()
        text, calls = f"{text} and {text2}", [call, call2]
    if kind in (1, 3):      # the home lacks the device: the right answer is error_input
        calls = [Call("error_input")] + calls[1:]
    if kind == 4:           # mixed: one operation the home can do, one it cannot
        calls = calls[:1] + [Call("error_input")]
    wrong = [Call(f"{room}.{dev}.turn_off" if calls[0].name.endswith("turn_on") else f"{room}.{dev}.turn_on")]
    probes = [([Call("status", {"room": room})], f"{room}: {dev} {rng.choice(['on', 'off', 'idle'])}")]
    return text[0].upper() + text[1:] + ".", kind, probes, calls, wrong


def _failure_item(rng: random.Random, n: int):
    agent, step = rng.choice(AGENTS), rng.randint(2, 24)
    text = f"Log {n} failed after {step + rng.randint(1, 6)} steps. Who caused it, at which step?"
    final = [Call("blame", {"agent": agent, "step": step})]
    wrong = [Call("blame", {"agent": rng.choice([a for a in AGENTS if a != agent]), "step": step + 1})]
    probes = [([Call("next", {})],
               f"step {k} {agent if k == step else rng.choice(AGENTS)}: "
               + (rng.choice(EVENTS) if k == step else "ok"))
              for k in (step - 1, step, step + 1)]
    return text, n % 2, probes, final, wrong


def _rbac_item(rng: random.Random, n: int):
    role, table, priv = rng.choice(ROLES), rng.choice(TABLES), rng.choice(PRIVS)
    parent = rng.choice([r for r in ROLES if r != role])
    allowed, inherited = rng.random() < 0.4, n % 2
    text = f"Can the {role} role {priv.lower()} rows of {table}?"
    final = [Call("answer", {"allowed": "yes" if allowed else "no"})]
    wrong = [Call("answer", {"allowed": "no" if allowed else "yes"})]
    probes = [([Call("sql", {"query": f"SELECT parent FROM roles WHERE role='{role}'"})], f"1 row: {parent}"),
              ([Call("sql", {"query": f"SELECT priv FROM grants WHERE role='{parent if inherited else role}' "
                                      f"AND obj='{table}'"})], f"1 row: {priv}" if allowed else "0 rows")]
    return text, inherited, probes, final, wrong


ITEM_MAKERS = {"smart_home": _smart_home_item, "failure_attribution": _failure_item, "rbac_sql": _rbac_item}
# turns per episode: look something up (one probe per turn), then answer
TASK_TURNS = {"smart_home": 2, "failure_attribution": 4, "rbac_sql": 3}


class Renderer:
    """Renders calls in every interface and computes, with the real parsers, why broken outputs fail."""

    def __init__(self):
        self.ifaces = [get_interface(n) for n in IFACES]
        self.retry: dict[str, str] = {}   # parse error -> the retry message (one string object per error)

    def error(self, iface: int, strict: bool, output: str, names: set[str]) -> str | None:
        try:
            calls = self.ifaces[iface].parse(output, strict=strict)
        except ParseError as e:
            return str(e)
        for c in calls:  # parsed, but the task's tool schema may still refuse it (as task.check_call does)
            if c.name not in names:
                return f"unknown tool {c.name!r}"
        return None

    def calls(self, calls: list[Call], feedback: str) -> Calls:
        outs = [i.render(calls) for i in self.ifaces]
        names = {c.name for c in calls}
        mangled = [Call(calls[0].name.replace(".", "_", 1) if "." in calls[0].name else calls[0].name + "_tool",
                        calls[0].args)] + calls[1:]
        mismatch = []
        for i in range(len(IFACES)):
            own = outs[i]
            garbage_src = [own[: max(4, len(own) * 3 // 5)],            # cut off mid-answer
                           "Sure:\n" + own,                               # prose around the answer
                           "```\n" + own + "\n```",                      # a code fence
                           self.ifaces[i].render(mangled),               # an unknown tool name
                           "I cannot answer that with the tools I have."]  # no answer at all
            for strict in (False, True):
                wrong_format = {j: (outs[j], err, _tokens(outs[j])) for j in range(len(IFACES)) if j != i
                                if (err := self.error(i, strict, outs[j], names))}
                garbage = [(g, err, _tokens(g)) for g in garbage_src if (err := self.error(i, strict, g, names))]
                mismatch.append((wrong_format, garbage))
        # compact separators: turns.action is read back as JSON, never shown raw, and 5M of them add up
        action = json.dumps([c.to_dict() for c in calls], separators=(",", ":"))
        return Calls(valid=[(o, _tokens(o)) for o in outs], action=action, feedback=feedback,
                     prediction=json.dumps(_ops(calls)), mismatch=mismatch)

    def retry_message(self, error: str) -> str:
        hit = self.retry.get(error)
        if hit is None:
            hit = self.retry[error] = RETRY.format(error=error[:32])
        return hit


def _tokens(text: str) -> int:
    return max(1, len(text) // 3)


def _answer_feedback(calls: list[Call]) -> str:
    """What the environment says to an answer; like the real smart home, it does not say whether it was right."""
    return "\n".join(f"{op}: {'noted' if c.name == 'error_input' else 'ok' if '.' in c.name else 'recorded'}"
                     for c, op in zip(calls, _ops(calls)))


def build_items(tasks, splits, seed: int, renderer: Renderer) -> dict[tuple[str, str], list[Item]]:
    """A small pool of items per task and split; episodes cycle through it."""
    pools = {}
    for task in tasks:
        maker = ITEM_MAKERS.get(task, _smart_home_item)
        abbr = "".join(w[0] for w in task.split("_"))     # item ids as short as HomeBench's
        for split in splits:
            rng = random.Random(f"{seed}-items-{task}-{split}")
            items = []
            for n in range(ITEMS_PER_SPLIT):
                text, cat, probes, final, wrong = maker(rng, n)
                items.append(Item(
                    id=f"{abbr}-{split}-{n}", input=text, category=cat,
                    prompts=[prefix + text for prefix in USER_PREFIXES],
                    probes=[renderer.calls(c, fb) for c, fb in probes],
                    final=renderer.calls(final, _answer_feedback(final)),
                    wrong=renderer.calls(wrong, _answer_feedback(wrong))))
            pools[task, split] = items
    return pools


# -- harnesses ---------------------------------------------------------------------------------------
@dataclass
class Harness:
    id: str
    spec: dict
    creator: str
    rationale: str
    round: int | None
    parents: list
    created_at: str
    variant: int = 0     # which instruction-library entry the system prompt comes from
    operator: str = "seed"

    @property
    def iface(self) -> int:
        return IFACES.index(self.spec["interface"]["name"])


def _seed_specs() -> list[dict]:
    return [HarnessSpec.load(ASSETS / "harnesses" / f"{name}.yaml").to_dict() for name in SEED_FILES]


def _instruction_library() -> list[str]:
    return yaml.safe_load((ASSETS / "instructions" / "smart_home.yaml").read_text())


def _mutate(spec: dict, variant: int, rng: random.Random, library: list[str], shots: list[dict]
            ) -> tuple[dict, int, str, str]:
    """One small edit, as the offline editor's operators make: (spec, variant, operator, rationale)."""
    s = json.loads(json.dumps(spec))
    op = rng.choice(["switch_interface", "switch_interface", "add_few_shot", "remove_few_shot",
                     "rewrite_instruction", "toggle_strictness", "retry_on_parse_error", "max_turns", "temperature"])
    if op == "add_few_shot" and len(s["few_shot"]) < 3:
        s["few_shot"].append(rng.choice(shots))
        return s, variant, op, f"add an archived success as a few-shot example: {s['few_shot'][-1]['input']!r}"
    if op == "remove_few_shot" and s["few_shot"]:
        i = rng.randrange(len(s["few_shot"]))
        del s["few_shot"][i]
        return s, variant, op, f"remove few-shot example {i}"
    if op == "rewrite_instruction":
        new = rng.choice([v for v in range(len(library)) if v != variant])
        s["system_prompt"] = library[new]
        return s, new, op, f"rewrite the instruction (library entry {new})"
    if op == "toggle_strictness":
        s["strict"] = not s["strict"]
        return s, variant, op, f"parser strictness -> {'strict' if s['strict'] else 'lenient'}"
    if op == "retry_on_parse_error":
        loop = s["loop"]
        loop["retry_on_parse_error"] = not loop["retry_on_parse_error"]
        loop["max_turns"] = max(2, loop["max_turns"]) if loop["retry_on_parse_error"] else 1
        return s, variant, op, ("add a retry turn on parse errors" if loop["retry_on_parse_error"]
                                else "drop the retry turn on parse errors")
    if op == "max_turns":
        s["loop"]["max_turns"] = rng.choice([t for t in (1, 2, 3, 4) if t != s["loop"]["max_turns"]])
        return s, variant, op, f"allow {s['loop']['max_turns']} turn(s) per episode"
    if op == "temperature":
        old = s["sampling"]["temperature"]
        s["sampling"]["temperature"] = rng.choice([t for t in (0.0, 0.2, 0.5, 0.7) if t != old])
        return s, variant, op, f"sampling temperature -> {s['sampling']['temperature']}"
    # switch_interface, and the fallback when the drawn operator does not apply
    old = s["interface"]["name"]
    new = rng.choice([n for n in IFACES if n != old])
    s["interface"] = {"name": new}
    return s, variant, "switch_interface", f"switch the output interface {old} -> {new}"


def _llm_rationale(rng: random.Random, ops: list[str], parent: str) -> str:
    cause = rng.choice(["parse errors", "wrong tool names", "prose around calls"])
    return f"Failures of {parent} are mostly {cause}; I made {len(ops)} change(s): " + "; ".join(ops) + "."


def build_harnesses(n: int, rounds: int, seed: int, pools) -> list[Harness]:
    rng = random.Random(f"{seed}-harnesses")
    library = _instruction_library()
    shots = [{"input": it.input, "calls": json.loads(it.final.action)}
             for (task, _), items in sorted(pools.items()) if task == "smart_home" for it in items[:12]]
    shots = shots or [{"input": "Turn on the light in the kitchen.",
                       "calls": [{"name": "kitchen.light.turn_on", "args": {}}]}]
    out = [Harness(f"h{i + 1}", spec, "seed", "seed harness", None, [], _at(0, i))
           for i, spec in enumerate(_seed_specs())]
    per_round: dict[int, int] = {}
    for i in range(3, n):
        r = 1 + (i - 3) * rounds // (n - 3)
        k = per_round[r] = per_round.get(r, 0) + 1
        earlier = [h for h in out if (h.round or 0) < r]
        recent = earlier[-20:]
        first = rng.choice(recent) if rng.random() < 0.5 else rng.choice(earlier)
        parents = [first]
        if len(earlier) > 1 and rng.random() < 0.1:   # crossover: a second parent lends some fields
            parents.append(rng.choice([h for h in earlier if h is not first]))
        llm = rng.random() < 0.2
        spec, variant = json.loads(json.dumps(first.spec)), first.variant
        notes, ops = [], []
        if len(parents) == 2:
            other = parents[1]
            took = rng.sample(["interface", "few_shot", "system_prompt", "loop"], 2)
            for key in took:
                spec[key] = json.loads(json.dumps(other.spec[key]))
            if "system_prompt" in took:
                variant = other.variant
            notes.append(f"crossover of {first.id} and {other.id}: {' and '.join(took)} from {other.id}")
            ops.append("crossover")
        for _ in range(2 if llm else 1):
            spec, variant, op, why = _mutate(spec, variant, rng, library, shots)
            notes.append(why)
            ops.append(op)
        if llm:  # the LLM editor also rewords the instruction
            spec["system_prompt"] += "\n" + rng.choice(LLM_NOTES)
        base = first.spec["name"].split("@")[0]
        spec["name"] = f"{base}@r{r}" if k == 1 else f"{base}@r{r}.{k}"
        spec = HarnessSpec.from_dict(spec, source=f"synthetic h{i + 1}").to_dict()
        rationale = _llm_rationale(rng, notes, first.id) if llm else "; ".join(notes)
        out.append(Harness(f"h{i + 1}", spec, "editor:llm" if llm else "editor:offline", rationale, r,
                           [p.id for p in parents], _at(r, 600 + 60 * k), variant, "+".join(ops)))
    return out


def harness_rows(harnesses: list[Harness]):
    seen = set()
    for h in harnesses:
        spec_json = json.dumps(h.spec, sort_keys=True)
        digest = spec_hash(spec_json)
        if digest in seen:
            raise AssertionError(f"synthetic harness {h.id} repeats a spec")  # names are unique, so never
        seen.add(digest)
        yield (h.id, h.spec["name"], spec_json, digest, h.spec["interface"]["name"], h.creator, h.rationale,
               h.round, h.created_at)


def harness_parent_rows(harnesses: list[Harness]):
    for h in harnesses:
        for pos, p in enumerate(h.parents):
            yield (h.id, p, pos)


# -- checkpoints and the data sets they were trained on ----------------------------------------------
@dataclass
class Checkpoint:
    id: str
    name: str
    kind: str
    harness_id: str | None
    dataset_id: str | None
    recipe: dict
    round: int | None
    parents: list              # (checkpoint id, role)
    created_at: str
    affinity: tuple            # how well it speaks each interface, 0..1 per IFACES entry
    skill: float               # how often a well-formed answer is right, before task difficulty
    ancestors: frozenset = field(default_factory=frozenset)


@dataclass
class Dataset:
    id: str
    path: str
    task: str
    harness_id: str | None
    checkpoint_id: str | None
    source: str
    tasks_tried: int
    samples: int
    kept: int
    meta: dict
    created_at: str


def _onehot(i: int) -> tuple:
    return tuple(1.0 if j == i else 0.0 for j in range(len(IFACES)))


def _mix(a: tuple, b: tuple, wa: float) -> tuple:
    return tuple(wa * x + (1 - wa) * y for x, y in zip(a, b))


def mismatch_rate(h: Harness, c: Checkpoint) -> float:
    """The turn-level mismatch probability of a pair: low when the checkpoint learned the harness's
    interface, high when it learned another one; a lenient parser and few-shot examples help a little."""
    miss = (1.0 - c.affinity[h.iface]) ** 1.5
    p = 0.03 + 0.85 * miss
    if not h.spec["strict"]:
        p *= 0.7
    p *= 1.0 - 0.06 * len(h.spec["few_shot"])
    p += 0.05 * h.spec["sampling"]["temperature"]
    return min(0.97, max(0.01, p))


def correct_rate(h: Harness, c: Checkpoint, task: str) -> float:
    q = c.skill * TASK_DIFFICULTY.get(task, 0.8) * (1.0 - 0.15 * h.spec["sampling"]["temperature"])
    q += 0.02 * len(h.spec["few_shot"]) + 0.02 * h.variant
    return min(0.98, max(0.02, q))


def build_checkpoints(n: int, rounds: int, seed: int, harnesses: list[Harness], files_dir: Path, task: str,
                      profile: dict) -> tuple[list[Checkpoint], list[Dataset]]:
    rng = random.Random(f"{seed}-checkpoints")
    ckdir, datadir = files_dir / "checkpoints", files_dir / "data"
    by_id = {h.id: h for h in harnesses}
    zero = (0.0,) * len(IFACES)
    out = [Checkpoint("c1", "tiny-base", "base", None, None, {"tiny": {"hidden_size": 256, "num_hidden_layers": 4}},
                      None, [], _at(0, 10), zero, 0.12)]
    datasets: list[Dataset] = []
    for k, (hid, name) in enumerate((("h1", "root-json"), ("h2", "root-xml"))):
        did = f"d{len(datasets) + 1}"
        datasets.append(Dataset(did, str(datadir / f"{name}-gold.jsonl"), task, hid, None, "gold", 2000, 2000, 2000,
                                {"split": "train"}, _at(0, 20 + k)))
        out.append(Checkpoint(f"c{k + 2}", name, "sft", hid, did, {"profile": profile, "seed": seed}, None,
                              [("c1", "init")], _at(0, 600 + k), _mix(_onehot(by_id[hid].iface), zero, 0.9),
                              0.5 + 0.05 * rng.random(), frozenset({"c1"})))
    per_round: dict[int, int] = {}
    for i in range(3, n):
        r = 1 + (i - 3) * rounds // (n - 3)
        k = per_round[r] = per_round.get(r, 0) + 1
        cid = f"c{i + 1}"
        trained = [c for c in out if c.kind != "base" and (c.round or 0) < r]
        if k > 1 and len(trained) >= 2 and rng.random() < 0.1:
            out.append(_merge(cid, r, k, rng, trained, ckdir))
            continue
        # the round's first checkpoint trains under the round's first harness; later ones under any of that
        # round or earlier (parallel trainings in a batch round)
        here = [h for h in harnesses if h.round == r]
        h = here[0] if k == 1 and here else rng.choice([h for h in harnesses if (h.round or 0) <= r])
        init = rng.choice(trained[-10:]) if rng.random() < 0.6 else rng.choice(trained)
        if k > 1 and rng.random() < 0.05:
            init = out[0]       # now and then a fresh start from the base
        p, q = mismatch_rate(h, init), correct_rate(h, init, task)
        tried = rng.choice((100, 200, 400))
        samples = 4 * tried
        kept = max(1, int(samples * (1 - p) * q))
        did = f"d{len(datasets) + 1}"
        datasets.append(Dataset(did, str(datadir / f"round{r}-{h.id}-{init.id}.jsonl"), task, h.id, init.id,
                                "rejection", tried, samples, kept, {"k": 4, "round": r, "temperature": 1.0},
                                _at(r, 1800 + 60 * k)))
        name = f"sft-r{r}" if k == 1 else f"sft-r{r}.{k}"
        out.append(Checkpoint(cid, name, "sft", h.id, did, {"profile": profile, "seed": seed + r}, r,
                              [(init.id, "init")], _at(r, 3000 + 60 * k),
                              _mix(init.affinity, _onehot(h.iface), 0.1),
                              min(0.95, init.skill + 0.02 + 0.08 * rng.random()), init.ancestors | {init.id}))
    return out, datasets


def _merge(cid: str, r: int, k: int, rng: random.Random, trained: list[Checkpoint], ckdir: Path) -> Checkpoint:
    """A TIES merge of 2-3 earlier checkpoints over their deepest common ancestor, as mergekit records it."""
    models = rng.sample(trained, min(len(trained), rng.choice((2, 2, 3))))
    common = frozenset.intersection(*(m.ancestors for m in models))
    by_id = {c.id: c for c in trained}
    base = max(common, key=lambda a: (len(by_id[a].ancestors) if a in by_id else 0, int(a[1:])))
    weights = [round(1 / len(models), 4)] * len(models)
    name = f"merge-r{r}-{'-'.join(m.id for m in models)}"
    recipe = {"mergekit": {"merge_method": "ties", "base_model": str(ckdir / _ckname(base, trained)),
                           "models": [{"model": str(ckdir / m.name), "parameters": {"density": 0.5, "weight": w}}
                                      for m, w in zip(models, weights)],
                           "parameters": {"normalize": True}, "dtype": "float32"},
              "base": base}
    affinity = tuple(sum(m.affinity[i] for m in models) / len(models) for i in range(len(IFACES)))
    skill = min(0.95, sum(m.skill for m in models) / len(models) + 0.03)
    ancestors = frozenset.union(*(m.ancestors | {m.id} for m in models))
    return Checkpoint(cid, name, "merge", None, None, recipe, r, [(m.id, "model") for m in models] + [(base, "base")],
                      _at(r, 3000 + 60 * k), affinity, skill, ancestors)


def _ckname(cid: str, known: list[Checkpoint]) -> str:
    return next((c.name for c in known if c.id == cid), "tiny-base")


def checkpoint_rows(checkpoints: list[Checkpoint], files_dir: Path):
    for c in checkpoints:
        yield (c.id, c.name, str(files_dir / "checkpoints" / c.name), c.kind, c.harness_id, c.dataset_id,
               json.dumps(c.recipe), c.round, c.created_at)


def checkpoint_parent_rows(checkpoints: list[Checkpoint]):
    for c in checkpoints:
        for parent, role in c.parents:
            yield (c.id, parent, role)


def dataset_rows(datasets: list[Dataset]):
    for d in datasets:
        yield (d.id, d.path, d.task, d.harness_id, d.checkpoint_id, d.source, d.tasks_tried, d.samples, d.kept,
               d.kept / d.samples if d.samples else None, json.dumps(d.meta), d.created_at)


# -- evaluations, episodes, turns --------------------------------------------------------------------
@dataclass
class EvalPlan:
    harness: Harness
    checkpoint: Checkpoint
    task: str
    split: str
    round: int | None
    id: int = 0
    turns: int = 0
    at: str = ""


def plan_evaluations(n: int, turns: int, rounds: int, seed: int, harnesses, checkpoints, tasks, splits,
                     mains: dict[int, tuple[Harness, Checkpoint]]) -> list[EvalPlan]:
    """Which pairs are evaluated where: the seed matrix, each round's own evaluation, then a spread over
    pairs (mostly distinct, some re-evaluated), ordered by round like a real archive grows."""
    rng = random.Random(f"{seed}-evaluations")
    roots = [c for c in checkpoints if c.kind == "sft" and c.round is None]
    plans = [EvalPlan(h, c, tasks[0], splits[0], None) for h in harnesses[:3] for c in roots]
    plans += [EvalPlan(h, c, tasks[0], splits[0], r) for r, (h, c) in sorted(mains.items())]
    combos = [(t, s) for t in tasks for s in splits]
    task_w = [2.0 if t == tasks[0] else 1.0 for t in tasks]
    # a harness is mostly evaluated with checkpoints of nearby rounds
    by_round: dict[int, list] = {}
    for c in checkpoints:
        by_round.setdefault(c.round or 0, []).append(c)
    near = {r: [c for q in range(r - 3, r + 4) for c in by_round.get(q, [])] for r in range(rounds + 1)}
    # and often with one trained under its own interface: the pairs a co-evolution run actually makes
    speaks = {i: [c for c in checkpoints if max(c.affinity) > 0.5 and c.affinity.index(max(c.affinity)) == i]
              for i in range(len(IFACES))}
    seen: list[tuple] = []
    while len(plans) < n:
        again = bool(seen) and rng.random() < 0.05
        if again:                               # a re-evaluation of an earlier pair, in the same or a later round
            h, c, t, s = rng.choice(seen)
        else:
            h = rng.choice(harnesses)
            pool = near[h.round or 0]
            x = rng.random()
            if x < 0.4 and speaks[h.iface]:
                c = rng.choice(speaks[h.iface])
            else:
                c = rng.choice(pool) if pool and x < 0.8 else rng.choice(checkpoints)
            if len(seen) < len(combos):         # every task and split gets evaluations
                t, s = combos[len(seen)]
            else:
                t = rng.choices(tasks, weights=task_w)[0]
                s = splits[0] if rng.random() < 0.7 else rng.choice(splits)
            seen.append((h, c, t, s))
        r = max(h.round or 0, c.round or 0)
        if again:
            r = min(rounds, r + rng.randint(0, 3))
        plans.append(EvalPlan(h, c, t, s, r or None))
    plans = plans[:n]
    plans.sort(key=lambda p: p.round or 0)    # stable: ids grow with rounds
    _spread_turns(plans, turns, rng)
    in_round: dict[int, int] = {}
    for p in plans:
        in_round[p.round or 0] = in_round.get(p.round or 0, 0) + 1
    k: dict[int, int] = {}
    for i, p in enumerate(plans):
        p.id = i + 1
        r = p.round or 0
        k[r] = k.get(r, 0) + 1
        # evaluations fill the last part of their round's window, in id order
        p.at = _at(p.round, 4000 + k[r] * min(1.0, 3000 / in_round[r]))
    return plans


def _spread_turns(plans: list[EvalPlan], total: int, rng: random.Random) -> None:
    """Turns per evaluation: the mean, jittered in pairs (+d, -d) so the total stays exact."""
    if not plans:
        return
    base, extra = divmod(total, len(plans))
    for i, p in enumerate(plans):
        p.turns = base + (1 if i < extra else 0)
    for i in range(0, len(plans) - 1, 2):
        d = rng.randint(0, base // 4)
        if plans[i + 1].turns - d >= 1:
            plans[i].turns += d
            plans[i + 1].turns -= d


class EvalWriter:
    """Generates the turn rows of a chunk of evaluations, collecting its episode and evaluation rows
    on the way: an evaluation's counts are the sums over the turns just generated."""

    def __init__(self, pools, renderer: Renderer, seed: int, max_turns: int):
        self.pools, self.renderer, self.max_turns = pools, renderer, max_turns
        self.rng = random.Random(f"{seed}-turns")
        self.episodes: list[tuple] = []
        self.evaluations: list[tuple] = []
        self.results: list[tuple] = []     # (id, harness, checkpoint, task, split, round, score, timr)

    def turns(self, plans: list[EvalPlan]):
        for plan in plans:
            yield from self._evaluation(plan)

    def _evaluation(self, plan: EvalPlan):
        """Episodes as the runtime plays them: a few look-up steps, then the answer. A mismatch ends the
        episode unless the harness retries (then the same step is tried again, once); episodes follow each
        other until the evaluation's turn budget is spent, so its total is exact."""
        rnd = self.rng.random
        h, c = plan.harness, plan.checkpoint
        items = self.pools[plan.task, plan.split]
        p = min(0.97, max(0.005, mismatch_rate(h, c) * (0.85 + 0.3 * rnd())))
        q = correct_rate(h, c, plan.task)
        key = h.iface * 2 + (1 if h.spec["strict"] else 0)
        # the checkpoint answers in the interface it knows best: that is the typical mismatch
        best = max(range(len(IFACES)), key=lambda i: c.affinity[i])
        dominant = best if best != h.iface and c.affinity[best] >= 0.3 else None
        retry = self.renderer.retry_message
        retries = h.spec["loop"]["retry_on_parse_error"]
        steps = min(self.max_turns, TASK_TURNS.get(plan.task, 2))
        cap = steps + (1 if retries else 0)
        variant, eid, iface = h.variant, plan.id, h.iface
        start = int(rnd() * len(items))
        remaining = plan.turns
        n_mism = tokens = successes = 0
        cat_n = [0] * 5
        cat_ok = [0] * 5
        ep = 0
        while remaining > 0:
            item = items[(start + ep) % len(items)]
            prompt = item.prompts[variant]
            ep_mism = success = t = s = 0
            prediction = None
            answer = item.final if rnd() < q else item.wrong
            while True:
                calls = answer if s == steps - 1 else item.probes[s % len(item.probes)]
                more = t + 1 < cap and t + 1 < remaining        # could another turn follow?
                if rnd() < p:
                    wrong_format, garbage = calls.mismatch[key]
                    if dominant is not None and dominant in wrong_format and rnd() < 0.75:
                        out, err, tok = wrong_format[dominant]
                    elif garbage:
                        out, err, tok = garbage[int(rnd() * len(garbage))]
                    else:
                        out, err, tok = next(iter(wrong_format.values()))
                    again = retries and more
                    feedback = retry(err) if again else ""
                    yield (eid, ep, t, prompt, out, None, err, 1, feedback, 0.0, tok)
                    ep_mism += 1
                else:
                    out, tok = calls.valid[iface]
                    final = s == steps - 1
                    reward = 1.0 if final and calls is item.final else 0.0
                    yield (eid, ep, t, prompt, out, calls.action, None, 0, calls.feedback, reward, tok)
                    prediction = calls.prediction
                    success = int(reward == 1.0)
                    feedback = calls.feedback
                    again = not final and more
                    s += 1
                tokens += tok
                t += 1
                if not again:
                    break
                prompt = feedback     # the next turn's prompt is what the model was just told
            remaining -= t
            n_mism += ep_mism
            successes += success
            cat_n[item.category] += 1
            cat_ok[item.category] += success
            self.episodes.append((eid, ep, item.id, item.input, 0, success, float(success), t, ep_mism, prediction))
            ep += 1
        n_turns = plan.turns
        score = successes / ep
        timr = n_mism / n_turns
        metrics = _metrics(plan.task, score, cat_n, cat_ok, p)
        seconds = round(n_turns * (0.04 + 0.02 * rnd()) + 2.0, 3)
        self.evaluations.append((eid, h.id, c.id, plan.task, plan.split, score, json.dumps(metrics), ep, n_turns,
                                 n_mism, timr, tokens, seconds, EVAL_CONFIG, plan.round, plan.at))
        self.results.append((eid, h.id, c.id, plan.task, plan.split, plan.round, score, timr))


def _metrics(task: str, score: float, cat_n: list, cat_ok: list, p: float) -> dict:
    """Task metrics shaped like the real scorers': success per category and overall, with precision and
    recall a little above success (partly right answers count there)."""
    def pool(n, ok):
        if n == 0:
            return {"n": 0, "success": None, "precision": None, "recall": None, "f1": None}
        s = ok / n
        prec = min(1.0, s + (1 - s) * (1 - p) * 0.3)
        rec = min(1.0, s + (1 - s) * (1 - p) * 0.2)
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        return {"n": n, "success": s, "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4)}

    cats = CATEGORIES.get(task, ("all",))
    out = {cat: pool(cat_n[i], cat_ok[i]) for i, cat in enumerate(cats)}
    out["overall"] = pool(sum(cat_n), sum(cat_ok))
    out["overall"]["success"] = score
    return out


# -- rounds, their steps and decisions ---------------------------------------------------------------
def _round_mains(harnesses, checkpoints, rounds: int) -> dict[int, tuple[Harness, Checkpoint]]:
    """Each round's own harness (the edit) and checkpoint (the SFT): the first of that round."""
    out = {}
    for r in range(1, rounds + 1):
        h = next(h for h in harnesses if h.round == r)
        c = next(c for c in checkpoints if c.round == r and c.kind == "sft")
        out[r] = (h, c)
    return out


def _run_config(seed: int, tasks, splits, gate: str) -> str:
    return json.dumps({"task": tasks[0], "split": splits[0], "mode": "coevo", "inheritance": "select",
                       "editor": "offline", "gate": gate, "seed": seed, "start_harness": "smart_home-json",
                       "start_checkpoint": "root-json", "sample": {"k": 4, "temperature": 1.0, "tasks": 200},
                       "probe": {"items": 24, "stage1": 8, "contenders": 2}, "eval_limit": None, "profile": "cpu"})


class RoundWriter:
    """Rounds, their six steps and their two decisions, consistent with the lineage already built."""

    def __init__(self, seed, rounds, pending, harnesses, checkpoints, datasets, results, mains, tasks, splits):
        self.rng = random.Random(f"{seed}-rounds")
        self.seed, self.rounds, self.pending = seed, rounds, pending
        self.harnesses, self.checkpoints = harnesses, checkpoints
        self.datasets = {d.id: d for d in datasets}
        self.results, self.mains, self.tasks, self.splits = results, mains, tasks, splits
        self.round_rows, self.step_rows, self.decision_rows = [], [], []

    def build(self):
        own_eval = {}
        for eid, hid, cid, task, split, r, score, timr in self.results:
            main = self.mains.get(r)
            if main and (hid, cid, task, split) == (main[0].id, main[1].id, self.tasks[0], self.splits[0]):
                own_eval.setdefault(r, (eid, score, timr))
        best: dict[str, tuple] = {}     # harness -> best (score, -timr, timr) on the main task split, so far
        results = sorted(self.results, key=lambda x: (x[5] or 0, x[0]))
        pos = 0
        for r in range(1, self.rounds + 2):
            while pos < len(results) and (results[pos][5] or 0) < r:
                eid, hid, cid, task, split, _, score, timr = results[pos]
                if task == self.tasks[0] and split == self.splits[0]:
                    if hid not in best or (score, -timr) > best[hid][:2]:
                        best[hid] = (score, -timr, timr)
                pos += 1
            if r <= self.rounds:
                self._done_round(r, best, own_eval.get(r))
            elif self.pending:
                self._pending_round(r, best)

    # a done round: auto decisions mostly, some settled by a person
    def _done_round(self, r, best, own):
        h, c = self.mains[r]
        init = next(p for p, role in c.parents if role == "init")
        # most rounds ran with the auto gate; in the others a person settled both decisions
        gate = "require" if self.rng.random() < 0.15 else "auto"
        statuses = [self._status() if gate == "require" else "auto" for _ in range(2)]
        self.round_rows.append((r, "coevo", "done", _run_config(self.seed, self.tasks, self.splits, gate), _at(r, 0),
                                _at(r, STEP_AT["evaluate"] + 100)))
        parents_d = self._parents_decision(r, best, h.parents[0], statuses[0])
        inherit_d = self._inheritance_decision(r, h, init, statuses[1])
        d = self.datasets[c.dataset_id]
        results = {
            "curate": {"parents": [h.parents[0]], "decision": parents_d},
            "edit": {"harness": h.id, "operator": h.operator, "rationale": h.rationale, "refused": None},
            "inherit": {"checkpoint": init, "decision": inherit_d},
            "sample": {"dataset": d.id, "tasks_tried": d.tasks_tried, "samples": d.samples, "kept": d.kept},
            "sft": {"checkpoint": c.id, "trained": True},
            "evaluate": ({"evaluation": own[0], "harness": h.id, "checkpoint": c.id, "score": own[1], "timr": own[2]}
                         if own else {"evaluation": None, "harness": h.id, "checkpoint": c.id}),
        }
        for step in STEPS:
            self.step_rows.append((r, step, "done", json.dumps(results[step]), _at(r, STEP_AT[step])))

    # the final round: running, waiting on `pending` proposed decisions
    def _pending_round(self, r, best):
        self.round_rows.append((r, "coevo", "running", _run_config(self.seed, self.tasks, self.splits, "require"),
                                _at(r, 0), None))
        latest_h = self.harnesses[-1]
        for k in range(self.pending):
            if k % 2 == 0:
                self._parents_decision(r, best, None, "proposed")
            else:
                self._inheritance_decision(r, latest_h, None, "proposed")

    def _status(self) -> str:
        """How a person settled a decision under the require gate."""
        return "overridden" if self.rng.random() < 0.3 else "approved"

    def _decision(self, r, step, kind, candidates, evidence, proposed, choice, rationale, status):
        did = len(self.decision_rows) + 1
        at = 300 if kind == "parents" else 1600      # before the step (curate, inherit) that waits on it
        created = _at(r, at)
        if status == "auto":
            by, comment, decided = "engine", None, created
        elif status == "proposed":
            by, comment, decided, choice = None, None, None, proposed
        else:
            by = self.rng.choice(PEOPLE)
            comment = self.rng.choice(APPROVE_COMMENTS if status == "approved" else OVERRIDE_COMMENTS)
            decided = _at(r, at + 60 + int(self.rng.random() * 180))
        self.decision_rows.append((did, r, step, kind, json.dumps(candidates), json.dumps(evidence), choice, rationale,
                                   status, by, comment, created, decided))
        return did

    def _parents_decision(self, r, best, choice, status) -> int:
        earlier = [h for h in self.harnesses if (h.round or 0) < r]
        children: dict[str, int] = {}
        for h in earlier:
            for p in h.parents:
                children[p] = children.get(p, 0) + 1
        scored = {h.id: best[h.id] for h in earlier if h.id in best}
        if choice is not None and choice not in scored:
            scored[choice] = (0.0, 0.0, 1.0)
        if not scored:
            scored = {h.id: (0.0, 0.0, 1.0) for h in earlier}
        mid = sorted(s[0] for s in scored.values())[len(scored) // 2]
        weights = {}
        for hid in sorted(scored, key=lambda x: int(x[1:])):
            s, _, timr = scored[hid]
            n = children.get(hid, 0)
            weights[hid] = {"score": s, "timr": timr, "children": n,
                            "weight": 1 / (1 + math.exp(-10 * (s - mid))) / (1 + n)}
        ids = list(weights)
        proposed = self.rng.choices(ids, weights=[weights[i]["weight"] for i in ids])[0]
        if status == "overridden" and choice == proposed:
            status = "approved"
        if status in ("auto", "approved"):
            proposed = choice if choice is not None else proposed
        why = f"sampled {proposed} by sigmoid(score - median) / (1 + children), seed {self.seed}"
        return self._decision(r, "curate", "parents", ids, {"weights": weights}, proposed,
                              choice if choice is not None else proposed, why, status)

    def _inheritance_decision(self, r, h: Harness, choice, status) -> int:
        cands = [c for c in self.checkpoints if c.kind != "base" and (c.round or 0) < r]
        task = self.tasks[0]
        probe = {}
        for c in cands:
            p, q = mismatch_rate(h, c), correct_rate(h, c, task)
            probe[c.id] = {"score": round(min(1.0, max(0.0, (1 - p) * q + 0.1 * (self.rng.random() - 0.5))), 4),
                           "timr": round(min(1.0, max(0.0, p + 0.05 * (self.rng.random() - 0.5))), 4), "n": 8}
        ranked = sorted(probe, key=lambda x: (-probe[x]["score"], probe[x]["timr"]))
        for cid in ranked[:2]:
            probe[cid]["n"] = 24     # the contenders got the whole probe set
        if choice is not None and status in ("auto", "approved"):
            # the engine chose it, so the evidence must show it on top
            top = probe[ranked[0]]
            probe[choice] = {"score": round(min(1.0, top["score"] + 0.02), 4), "timr": top["timr"], "n": 24}
            proposed = choice
        else:
            proposed = ranked[0] if ranked[0] != choice else (ranked[1] if len(ranked) > 1 else ranked[0])
            if choice == proposed:
                status = "approved" if status == "overridden" else status
        top = probe[proposed]
        why = (f"{proposed} fits harness {h.spec['name']} best: score {top['score']:.3f}, TIMR {top['timr']:.1%} "
               f"on {top['n']} probe tasks")
        # the evidence as the real `select` policy stores it: {"policy", "probe": {checkpoint: score, timr, n}}
        return self._decision(r, "inherit", "inheritance", [c.id for c in cands], {"policy": "select", "probe": probe},
                              proposed, choice if choice is not None else proposed, why, status)


def job_rows(rounds: int, files_dir: Path, harnesses, checkpoints, results, task: str, waiting: int | None):
    """A few jobs in every state, with the kinds, arguments, progress messages and results of engine.jobs."""
    r = rounds + 1
    h, c = harnesses[-1].id, checkpoints[-1]
    sft = next((ck for ck in reversed(checkpoints) if ck.kind == "sft"), c)
    last = results[-1] if results else (None, h, c.id, task, "dev", None, 0.0, 0.0)
    logs = files_dir / "logs"
    rows = [  # kind, args, state, progress, total, message, result, error, started, finished (s into the round)
        ("eval", {"harness": last[1], "checkpoint": last[2], "task": last[3], "split": last[4], "limit": None},
         "done", 50, 50, "50/50 episodes", {"evaluation": last[0], "score": last[6], "timr": last[7]}, None, 60, 400),
        ("sft", {"checkpoint": sft.parents[0][0], "harness": sft.harness_id, "dataset": sft.dataset_id,
                 "profile": "cpu", "seed": 0}, "done", 1, 1, f"registered {sft.id} {sft.name}", {"checkpoint": sft.id},
         None, 600, 2400),
        ("merge", {"models": [ck.id for ck in checkpoints[-3:-1]], "base": None, "density": 0.5}, "failed", 0, 1,
         "merging into merge-job", None, "mergekit: tensor model.layers.0.mlp.up_proj.weight has shape [512, 128] "
         "in one model and [512, 256] in another", 2500, 2560),
        ("eval", {"harness": h, "checkpoint": "c2", "task": task, "split": "test", "limit": None}, "failed", 12, 50,
         "12/50 episodes", None, "Traceback (most recent call last):\n  File \"engine/evaluate.py\", line 37, in "
         "run_evaluation\nRuntimeError: worker exited with signal 9 (out of memory)", 2600, 2900),
        ("round", {"rounds": 1, "gate": "require"}, "done", 0, 6, "round: curate",
         {"waiting": waiting} if waiting else {"rounds": []}, None, 2950, 3000),
        ("sft", {"checkpoint": c.id, "harness": h, "dataset": sft.dataset_id, "profile": "cpu", "seed": 0},
         "cancelled", 0, 1, "training sft-job (profile cpu; ms-swift logs to its train.log)", None, None, 3050, 3150),
        ("eval", {"harness": h, "checkpoint": c.id, "task": task, "split": "dev", "limit": None}, "running", 18, 50,
         "18/50 episodes", None, None, 3300, None),
        ("round", {"rounds": 2}, "running", 2, 6, f"round {r}: inherit", None, None, 3350, None),
        ("eval", {"harness": "h1", "checkpoint": c.id, "task": task, "split": "dev", "limit": None}, "queued", 0,
         None, "", None, None, None, None),
    ]
    for i, (kind, args, state, prog, total, msg, result, error, start, end) in enumerate(rows):
        created = _at(r, (3400 if start is None else start) - 30)     # queued a little before it started
        started = None if start is None else _at(r, start)
        finished = None if end is None else _at(r, end)
        yield (i + 1, kind, json.dumps(args), state, prog, total, msg, str(logs / f"job-{i + 1}.log"), None,
               None if result is None else json.dumps(result), error, created, started, finished)


# -- the build ---------------------------------------------------------------------------------------
SQL = {
    "harnesses": "INSERT INTO harnesses (id, name, spec, spec_hash, interface, creator, rationale, round, created_at) "
                 "VALUES (?,?,?,?,?,?,?,?,?)",
    "harness_parents": "INSERT INTO harness_parents (child, parent, position) VALUES (?,?,?)",
    "datasets": "INSERT INTO datasets (id, path, task, harness_id, checkpoint_id, source, tasks_tried, samples, kept, "
                "acceptance_rate, meta, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
    "checkpoints": "INSERT INTO checkpoints (id, name, path, kind, harness_id, dataset_id, recipe, round, created_at) "
                   "VALUES (?,?,?,?,?,?,?,?,?)",
    "checkpoint_parents": "INSERT INTO checkpoint_parents (child, parent, role) VALUES (?,?,?)",
    "evaluations": "INSERT INTO evaluations (id, harness_id, checkpoint_id, task, split, score, metrics, episodes, "
                   "turns, mismatched_turns, timr, tokens, seconds, config, round, created_at) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "episodes": "INSERT INTO episodes (evaluation_id, idx, item_id, input, sample, success, reward, turns, "
                "mismatched_turns, prediction) VALUES (?,?,?,?,?,?,?,?,?,?)",
    "turns": "INSERT INTO turns (evaluation_id, episode, turn, prompt, output, action, parse_error, mismatch, "
             "feedback, reward, tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    "rounds": "INSERT INTO rounds (id, mode, state, config, created_at, finished_at) VALUES (?,?,?,?,?,?)",
    "round_steps": "INSERT INTO round_steps (round_id, step, state, result, finished_at) VALUES (?,?,?,?,?)",
    "decisions": "INSERT INTO decisions (id, round_id, step, kind, candidates, evidence, choice, rationale, status, "
                 "decided_by, comment, created_at, decided_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "jobs": "INSERT INTO jobs (id, kind, args, state, progress, total, message, log_path, pid, result, error, "
            "created_at, started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
}


def _insert(conn: sqlite3.Connection, table: str, rows) -> int:
    """One table's rows in one transaction."""
    conn.execute("BEGIN")
    n = conn.executemany(SQL[table], rows).rowcount
    conn.execute("COMMIT")
    return n


def _check_sizes(harnesses, checkpoints, evaluations, turns, rounds, pending) -> int:
    if harnesses < 3 or checkpoints < 3:
        raise ValueError("need at least 3 harnesses (the seeds) and 3 checkpoints (base and two roots)")
    if evaluations < 0 or turns < evaluations or (evaluations == 0 and turns):
        raise ValueError("need at least one turn per evaluation, and evaluations for any turns")
    most = min(harnesses - 3, checkpoints - 3)
    if rounds is None:
        rounds = min(50, most)
    if rounds > most or (rounds == 0 and (harnesses > 3 or checkpoints > 3)) or rounds < 0:
        raise ValueError(f"rounds must be between 1 and {most} (each round adds a harness and a checkpoint)")
    if pending < 0:
        raise ValueError("pending_decisions must be >= 0")
    return rounds


def build_synthetic(path, *, harnesses: int = 500, checkpoints: int = 500, evaluations: int = 50_000,
                    turns: int = 5_000_000, tasks=("smart_home", "failure_attribution", "rbac_sql"),
                    splits=("dev", "test"), rounds: int | None = None, pending_decisions: int = 3, seed: int = 0,
                    overwrite: bool = False) -> dict:
    """Write a synthetic archive at `path`; returns the row counts written, the seconds taken and the size.

    `rounds` done rounds (default: min(50, harnesses - 3, checkpoints - 3)), plus, when
    `pending_decisions` > 0, one more round in state 'running' holding that many proposed decisions.
    """
    t0 = time.perf_counter()
    tasks, splits = tuple(tasks), tuple(splits)
    rounds = _check_sizes(harnesses, checkpoints, evaluations, turns, rounds, pending_decisions)
    path = Path(path)
    if path.exists():
        if not overwrite:
            raise FileExistsError(f"{path}: exists (pass overwrite=True to replace it)")
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)
    with Archive(path) as archive:   # the real schema, through the real migrations
        files_dir = archive.files_dir

    renderer = Renderer()
    pools = build_items(tasks, splits, seed, renderer)
    hs = build_harnesses(harnesses, rounds, seed, pools)
    profile = yaml.safe_load((ASSETS / "train" / "cpu.yaml").read_text())
    cks, dss = build_checkpoints(checkpoints, rounds, seed, hs, files_dir, tasks[0], profile)
    mains = _round_mains(hs, cks, rounds)
    plans = plan_evaluations(evaluations, turns, rounds, seed, hs, cks, tasks, splits, mains)
    max_turns = max(1, min(4, turns // (2 * evaluations))) if evaluations else 1  # at least 2 episodes

    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")       # a crash mid-build leaves a file nobody wants anyway
        conn.execute("PRAGMA cache_size = -131072")    # 128 MiB: the B-tree right edges stay in memory
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
        counts = {
            "harnesses": _insert(conn, "harnesses", harness_rows(hs)),
            "harness_parents": _insert(conn, "harness_parents", harness_parent_rows(hs)),
            "datasets": _insert(conn, "datasets", dataset_rows(dss)),
            "checkpoints": _insert(conn, "checkpoints", checkpoint_rows(cks, files_dir)),
            "checkpoint_parents": _insert(conn, "checkpoint_parents", checkpoint_parent_rows(cks)),
            "evaluations": 0, "episodes": 0, "turns": 0,
        }
        writer = EvalWriter(pools, renderer, seed, max_turns)
        results = []
        for i in range(0, len(plans), EVAL_CHUNK):
            # one transaction per chunk: its turns (generated), then the episodes and evaluations they summed to
            conn.execute("BEGIN")
            counts["turns"] += conn.executemany(SQL["turns"], writer.turns(plans[i:i + EVAL_CHUNK])).rowcount
            counts["episodes"] += conn.executemany(SQL["episodes"], writer.episodes).rowcount
            counts["evaluations"] += conn.executemany(SQL["evaluations"], writer.evaluations).rowcount
            conn.execute("COMMIT")
            results += writer.results
            writer.episodes, writer.evaluations, writer.results = [], [], []
        rw = RoundWriter(seed, rounds, pending_decisions, hs, cks, dss, results, mains, tasks, splits)
        rw.build()
        counts["rounds"] = _insert(conn, "rounds", rw.round_rows)
        counts["round_steps"] = _insert(conn, "round_steps", rw.step_rows)
        counts["decisions"] = _insert(conn, "decisions", rw.decision_rows)
        counts["pending_decisions"] = sum(1 for d in rw.decision_rows if d[8] == "proposed")
        waiting = next((d[0] for d in rw.decision_rows if d[8] == "proposed"), None)
        counts["jobs"] = _insert(conn, "jobs", job_rows(rounds, files_dir, hs, cks, results, tasks[0], waiting))
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")   # readers' caches see one write
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA analysis_limit = 1000")   # sampled statistics: ANALYZE in seconds, not minutes
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    counts["seconds"] = round(time.perf_counter() - t0, 3)
    counts["bytes"] = path.stat().st_size
    counts["path"] = str(path.resolve())
    return counts
