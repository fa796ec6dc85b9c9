"""The failure-attribution vertical (Who&When, TraceElephant): the trace of a failed multi-agent run is
the context, the question it was solving is the input, and the answer is the call
`blame(agent, step)`: who made the decisive error, and at which 0-based step.

Task options (a harness's `task_options`):
- `protocol`: `all_at_once` shows the trace in the context and takes one answer; `step_by_step` shows
  `window` steps at a time, and the model answers `next()` to see the next ones, or `blame(...)`;
  `binary_search` (as in the Who&When paper) shows a range of steps and the model answers
  `half(part="first"|"second")` to narrow it to the half that holds the mistake, or `blame(...)`; a
  range wider than `window` is shown coarsely (each step cut shorter), a narrow one in full;
- `window`: steps shown at once (all_at_once shows the first `window` steps and says how many more
  there are; a small model's context cannot hold a long real trace);
- `max_step_chars`: each step's text is cut to this many characters (real steps run to pages);
- `with_ground_truth`: show the question's correct answer, the benchmark's "with ground truth" setting.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.errors import InputError
from engine.harness.interfaces import Call
from engine.tasks import TASKS
from engine.tasks.base import Environment, Item, StepResult, Task, validate_options
from engine.tasks.failure_attribution import generator
from engine.tasks.failure_attribution.scorer import accuracy, grouped, hits, score_whowhen
from engine.tasks.failure_attribution.traces import Trace, load_traces

BLAME, NEXT, HALF = "blame", "next", "half"
HALVES = ("first", "second")


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    protocol: Literal["all_at_once", "step_by_step", "binary_search"] = "all_at_once"
    window: int = Field(10, ge=1, le=500)
    max_step_chars: int = Field(120, ge=20, le=100_000)
    with_ground_truth: bool = False


def parse_options(options: dict | None) -> Options:
    return validate_options(Options, options)


def render_step(i: int, trace: Trace, max_chars: int) -> str:
    step = trace.steps[i]
    text = " ".join(step.content.split())  # one line per step: newlines and runs of spaces collapse
    if len(text) > max_chars:
        text = text[:max_chars - 3].rstrip() + "..."
    return f"[{i}] {step.agent}: {text}"


def render_steps(trace: Trace, start: int, end: int, max_chars: int) -> str:
    return "\n".join(render_step(i, trace, max_chars) for i in range(start, min(end, len(trace.steps))))


def _span(start: int, end: int) -> str:
    return f"step {start}" if end - start == 1 else f"steps {start}-{end - 1}"


def _halves(lo: int, hi: int) -> tuple[tuple[int, int], tuple[int, int]]:
    mid = (lo + hi) // 2
    return (lo, mid), (mid, hi)


def render_range(trace: Trace, lo: int, hi: int, opts: "Options") -> str:
    """Binary search: the steps of [lo, hi) within one window's worth of characters (coarse while the
    range is wide), and the two halves to choose from."""
    chars = max(20, opts.window * opts.max_step_chars // max(1, hi - lo))
    lines = [render_steps(trace, lo, hi, min(chars, opts.max_step_chars))]
    if hi - lo > 1:
        (a, b), (c, d) = _halves(lo, hi)
        lines.append(f"(the mistake is in {_span(lo, hi)}: half(part=\"first\") narrows to {_span(a, b)}, "
                     f"half(part=\"second\") to {_span(c, d)})")
    return "\n".join(lines)


def _more(shown: int, total: int, window: int) -> str:
    """What the model is told after a chunk: the steps still hidden, or the end of the trace."""
    if shown >= total:
        return "(end of the trace)"
    return f"({_span(shown, total)} not shown yet: call next() for the next {min(window, total - shown)})"


class AttributionEnvironment(Environment):
    """Reveals steps on next() in step_by_step; a blame(...) ends the episode with the prediction."""

    def __init__(self, trace: Trace, options: Options):
        self.trace, self.opts = trace, options
        self.shown = min(options.window, len(trace.steps))  # the context shows the first chunk
        self.range = (0, len(trace.steps))  # binary search: the steps still in question

    def step(self, calls: list[Call]) -> StepResult:
        lines = []
        for call in calls:
            if call.name == BLAME:
                pred = {"agent": call.args.get("agent"), "step": call.args.get("step")}
                agent_ok, step_ok = hits(self.trace.mistake_agent, self.trace.mistake_step, pred)
                lines.append(f"Blame recorded: {pred['agent']} at step {pred['step']}.")
                return StepResult("\n".join(lines), 0.5 * agent_ok + 0.5 * step_ok, True, agent_ok and step_ok, pred)
            if call.name == HALF:
                lo, hi = self.range
                if self.opts.protocol != "binary_search" or hi - lo < 2:
                    lines.append("There is nothing to narrow: blame a step.")
                    continue
                self.range = _halves(lo, hi)[HALVES.index(call.args["part"])]
                lines.append(render_range(self.trace, *self.range, self.opts))
            elif call.name == NEXT:
                total = len(self.trace.steps)
                if self.opts.protocol != "step_by_step" or self.shown >= total:
                    # no more steps to see: the episode ends without an answer
                    lines.append("There are no more steps to show.")
                    return StepResult("\n".join(lines), 0.0, True, False, None)
                end = min(self.shown + self.opts.window, total)
                lines.append(render_steps(self.trace, self.shown, end, self.opts.max_step_chars))
                self.shown = end
                lines.append(_more(end, total, self.opts.window))
            else:
                lines.append(f"{call.name}: unknown call")
        return StepResult("\n".join(lines), 0.0, False, False, None)


@TASKS.register("failure_attribution")
class FailureAttributionTask(Task):
    name = "failure_attribution"
    benchmark = "whowhen"
    options_model = Options
    option_space = {
        "protocol": ["all_at_once", "step_by_step", "binary_search"],
        "window": [4, 6, 10, 16],
        "max_step_chars": [80, 120, 200, 400],
        "with_ground_truth": [True, False],
    }

    def __init__(self, data_dir):
        super().__init__(data_dir)
        self.rejected: list = []  # the traces of the last load() whose labels cannot be used

    def split_path(self, split: str) -> Path:
        """`data_dir/<split>/` (a folder of Who&When files), or a path to Who&When or TraceElephant data."""
        for candidate in (self.data_dir / split, Path(split)):
            if candidate.is_dir() or candidate.is_file() and candidate.suffix == ".json":
                return candidate
        raise InputError(f"no split {split!r}: neither a folder {self.data_dir / split} nor a trace path {split!r}")

    def has_split(self, split: str) -> bool:
        return (self.data_dir / split).is_dir()

    def load(self, split: str, limit: int | None = None) -> list[Item]:
        traces, self.rejected = load_traces(self.split_path(split))
        if not traces:
            raise InputError("no usable traces" + (f" ({len(self.rejected)} rejected: {self.rejected[0]})"
                                                   if self.rejected else ""), path=self.split_path(split))
        if self.rejected:  # reported, never dropped silently; the list stays on the task for callers
            warnings.warn(f"{len(self.rejected)} trace(s) of {split!r} not loaded, their labels are unusable: "
                          + "; ".join(map(str, self.rejected[:3])) + ("; ..." if len(self.rejected) > 3 else ""),
                          stacklevel=2)
        if limit is not None:
            traces = traces[:limit]
        return [Item(t.id, t.question, {"agent": t.mistake_agent, "step": t.mistake_step},
                     # synthetic traces say which error was injected; real ones are grouped by subset
                     str(t.meta.get("mistake_kind") or t.subfolder), context=t,
                     meta={"source": t.source, "subfolder": t.subfolder, "steps": len(t.steps),
                           "mistake_reason": t.mistake_reason})
                for t in traces]

    def context(self, item: Item, options: dict | None = None) -> str:
        opts = parse_options(options)
        trace: Trace = item.context
        total, shown = len(trace.steps), min(opts.window, len(trace.steps))
        lines = []
        if opts.with_ground_truth:
            lines.append(f"Correct answer to the question: {trace.ground_truth or '(not given)'}")
        lines.append(f"The team's log ({total} steps):")
        if opts.protocol == "binary_search":
            lines.append(render_range(trace, 0, total, opts))
            return "\n".join(lines)
        lines.append(render_steps(trace, 0, shown, opts.max_step_chars))
        if opts.protocol == "step_by_step":
            lines.append(_more(shown, total, opts.window))
        elif shown < total:
            lines.append(f"({_span(shown, total)} not shown)")
        return "\n".join(lines)

    def example_call(self) -> Call:
        return Call(BLAME, {"agent": "WebSurfer", "step": 3})

    def check_call(self, call: Call, item: Item) -> str | None:
        if call.name == NEXT:
            return f"next takes no arguments, got {sorted(call.args)}" if call.args else None
        if call.name == HALF:
            if sorted(call.args) != ["part"] or call.args["part"] not in HALVES:
                return f"half takes part=\"first\" or part=\"second\", got {call.args}"
            return None
        if call.name != BLAME:
            return f"unknown tool {call.name!r}: expected blame(agent, step), next() or half(part)"
        missing = sorted({"agent", "step"} - set(call.args))
        extra = sorted(set(call.args) - {"agent", "step"})
        if missing or extra:
            return "wrong arguments for blame: expected ['agent', 'step']" + \
                (f", missing {missing}" if missing else "") + (f", unexpected {extra}" if extra else "")
        if not isinstance(call.args["agent"], str) or not call.args["agent"].strip():
            return f"blame: agent must be a non-empty string, got {call.args['agent']!r}"
        step = call.args["step"]
        if not isinstance(step, int) or isinstance(step, bool):
            return f"blame: step must be an integer, got {step!r}"
        return None

    def call_names(self, item: Item, options: dict | None = None) -> list[str]:
        return [BLAME, NEXT, HALF]

    def arg_names(self, item: Item, name: str) -> list[str] | None:
        return {BLAME: ["agent", "step"], NEXT: [], HALF: ["part"]}.get(name)

    def environment(self, item: Item, options: dict | None = None) -> Environment:
        return AttributionEnvironment(item.context, parse_options(options))

    def gold_calls(self, item: Item) -> list[Call]:
        return [Call(BLAME, {"agent": item.gold["agent"], "step": item.gold["step"]})]

    def gold_turns(self, item: Item, options: dict | None = None) -> list[list[Call]]:
        opts = parse_options(options)
        if opts.protocol == "all_at_once":
            return [self.gold_calls(item)]
        if opts.protocol == "binary_search":  # halve toward the mistake until a window's worth is left
            turns, (lo, hi) = [], (0, item.meta["steps"])
            while hi - lo > opts.window:
                first, second = _halves(lo, hi)
                part = "first" if item.gold["step"] < first[1] else "second"
                turns.append([Call(HALF, {"part": part})])
                lo, hi = first if part == "first" else second
            return turns + [self.gold_calls(item)]
        # next() until the chunk that holds the mistake is shown, then the blame
        return [[Call(NEXT)]] * (item.gold["step"] // opts.window) + [self.gold_calls(item)]

    def score(self, items: list[Item], predictions: list) -> tuple[float, dict]:
        rows = [(i.gold["agent"], i.gold["step"], p if isinstance(p, dict) else None)
                for i, p in zip(items, predictions, strict=True)]
        overall, by_category = grouped(rows, [i.category for i in items]) if items else (accuracy([]), {})
        headline = (overall["agent_accuracy"] + overall["step_accuracy"]) / 2
        return headline, {**overall, "by_category": by_category}

    @classmethod
    def score_files(cls, gold, pred, *, rule: str = "exact", **_) -> dict:
        return score_whowhen(gold, pred, rule=rule)

    @classmethod
    def format_scores(cls, result: dict) -> str:
        lines = [f"Who&When, {result['rule']} match", f"{'':<24}{'n':>6}{'agent':>9}{'step':>9}"]
        lines += [f"{name:<24}{m['n']:>6}{m['agent_accuracy']:>9.3f}{m['step_accuracy']:>9.3f}"
                  for name, m in [*result["by_subfolder"].items(), ("overall", result["overall"])]]
        lines += [f"not scored: {r}" for r in result["rejected"]]
        if result["unknown_ids"]:
            lines.append(f"predictions for unknown traces: {', '.join(result['unknown_ids'])}")
        return "\n".join(lines)

    @classmethod
    def generate(cls, out_dir, *, seed: int, sizes: dict[str, int]) -> None:
        generator.write_dataset(out_dir, seed=seed, sizes=sizes)
