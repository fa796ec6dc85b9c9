"""The lineage of a synthetic archive: harnesses that evolve from the seed YAMLs by the offline editor's
kinds of edits (so parent/child diffs mean something), checkpoints fine-tuned under a harness and now
and then TIES-merged, the data sets they were trained on, and a fixed clock. Each pair's mismatch and
success rates follow how well the checkpoint learned the harness's output interface."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from engine import ASSETS
from engine.archive.store import spec_hash
from engine.harness.spec import HarnessSpec, edited_name
from engine.testing.synthetic.items import IFACES

SEED_FILES = ("smart_home_json", "smart_home_xml", "smart_home_tool_call")  # h1, h2, h3
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
ROUND_SPAN = timedelta(hours=2)
LLM_NOTES = ("Answer with the calls only, no prose.", "Never wrap the answer in a code fence.",
             "Use exactly the device names listed above.", "One call per operation, in the order given.")
TASK_DIFFICULTY = {"smart_home": 1.0, "failure_attribution": 0.6, "rbac_sql": 0.8}


def at(round_no: int | None, seconds: float) -> str:
    """A deterministic timestamp: round r happens in its own two-hour window after T0."""
    t = T0 + (round_no or 0) * ROUND_SPAN + timedelta(seconds=seconds)
    return t.isoformat(timespec="milliseconds")


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
    shots = [{"input": it.input, "calls": json.loads(it.gold.steps[-1].action)}
             for (task, _), pool in sorted(pools.items()) if task == "smart_home" for it in pool.items[:12]]
    shots = shots or [{"input": "Turn on the light in the kitchen.",
                       "calls": [{"name": "kitchen.light.turn_on", "args": {}}]}]
    out = [Harness(f"h{i + 1}", spec, "seed", "seed harness", None, [], at(0, i))
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
        spec["name"] = edited_name(first.spec, spec, f"r{r}" if k == 1 else f"r{r}.{k}")
        spec = HarnessSpec.from_dict(spec, source=f"synthetic h{i + 1}").to_dict()
        rationale = _llm_rationale(rng, notes, first.id) if llm else "; ".join(notes)
        out.append(Harness(f"h{i + 1}", spec, "editor:llm" if llm else "editor:offline", rationale, r,
                           [p.id for p in parents], at(r, 600 + 60 * k), variant, "+".join(ops)))
    return out


def harness_rows(harnesses: list[Harness]):
    seen = set()
    for h in harnesses:
        spec_json = json.dumps(h.spec, sort_keys=True)
        digest = spec_hash(spec_json)
        if digest in seen:
            raise AssertionError(f"synthetic harness {h.id} repeats a spec")  # names are unique, so never
        seen.add(digest)
        yield dict(id=h.id, name=h.spec["name"], spec=spec_json, spec_hash=digest,
                   interface=h.spec["interface"]["name"], creator=h.creator, rationale=h.rationale, round=h.round,
                   created_at=h.created_at)


def harness_parent_rows(harnesses: list[Harness]):
    for h in harnesses:
        for pos, p in enumerate(h.parents):
            yield dict(child=h.id, parent=p, position=pos)


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
                      None, [], at(0, 10), zero, 0.12)]
    datasets: list[Dataset] = []
    for k, (hid, name) in enumerate((("h1", "root-json"), ("h2", "root-xml"))):
        did = f"d{len(datasets) + 1}"
        datasets.append(Dataset(did, str(datadir / f"{name}-gold.jsonl"), task, hid, None, "gold", 2000, 2000, 2000,
                                {"split": "train"}, at(0, 20 + k)))
        out.append(Checkpoint(f"c{k + 2}", name, "sft", hid, did, {"profile": profile, "seed": seed}, None,
                              [("c1", "init")], at(0, 600 + k), _mix(_onehot(by_id[hid].iface), zero, 0.9),
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
                                at(r, 1800 + 60 * k)))
        name = f"sft-r{r}" if k == 1 else f"sft-r{r}.{k}"
        out.append(Checkpoint(cid, name, "sft", h.id, did, {"profile": profile, "seed": seed + r}, r,
                              [(init.id, "init")], at(r, 3000 + 60 * k),
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
                      at(r, 3000 + 60 * k), affinity, skill, ancestors)


def _ckname(cid: str, known: list[Checkpoint]) -> str:
    return next((c.name for c in known if c.id == cid), "tiny-base")


def checkpoint_rows(checkpoints: list[Checkpoint], files_dir: Path):
    for c in checkpoints:
        yield dict(id=c.id, name=c.name, path=str(files_dir / "checkpoints" / c.name), kind=c.kind,
                   harness_id=c.harness_id, dataset_id=c.dataset_id, recipe=json.dumps(c.recipe), round=c.round,
                   created_at=c.created_at)


def checkpoint_parent_rows(checkpoints: list[Checkpoint]):
    for c in checkpoints:
        for parent, role in c.parents:
            yield dict(child=c.id, parent=parent, role=role)


def dataset_rows(datasets: list[Dataset]):
    for d in datasets:
        yield dict(id=d.id, path=d.path, task=d.task, harness_id=d.harness_id, checkpoint_id=d.checkpoint_id,
                   source=d.source, tasks_tried=d.tasks_tried, samples=d.samples, kept=d.kept,
                   acceptance_rate=d.kept / d.samples if d.samples else None, meta=json.dumps(d.meta),
                   created_at=d.created_at)


