"""An LLM behind an OpenAI-compatible chat endpoint writes the new harness. Its reply is untrusted: it
must parse as YAML with a `rationale` and a `spec` that validates as a HarnessSpec, else EditorError."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import yaml

from engine.errors import CoevoError, InputError
from engine.evolve.editors import EDITORS, Edit
from engine.harness.spec import HarnessSpec
from engine.run_config import LlmConfig
from engine.tasks import task_class


class EditorError(CoevoError):
    pass


PROMPT = """You improve the harness of a small language-model agent: its system prompt, few-shot examples,
output interface, parser strictness, turn loop and sampling. The model's weights are fixed for this edit.

The parent harness (YAML):
{spec}

Its best evaluation: score {score}, turn-level interface mismatch rate (TIMR) {timr}.
Turns where it failed (raw model output and the reason):
{failures}

Write one improved harness. Reply with YAML only, with two top-level keys:
rationale: one sentence on what you changed and why
spec: the complete new harness, same schema as the parent
"""


def build_prompt(parent: dict, scores: dict, failures: list[dict]) -> str:
    lines = "\n".join(f"- output: {f['output'][:200]!r}\n  reason: {f['parse_error'] or 'wrong answer'}"
                      for f in failures) or "(none recorded)"
    return PROMPT.format(spec=HarnessSpec.from_dict(parent["spec"]).to_yaml(), score=scores.get("score", "n/a"),
                         timr=scores.get("timr", "n/a"), failures=lines)


def parse_reply(text: str) -> tuple[dict, str]:
    m = re.search(r"```(?:yaml|yml)?\s*\n(.*?)```", text, re.S)
    body = m.group(1) if m else text
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as e:
        raise EditorError(f"reply is not YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict) or "spec" not in data:
        raise EditorError("reply has no top-level 'spec'")
    try:
        spec = HarnessSpec.from_dict(data["spec"], source="LLM reply")
    except InputError as e:
        raise EditorError(f"reply's spec is not a valid harness: {e}") from None
    return spec.to_dict(), str(data.get("rationale", "")).strip() or "(no rationale given)"


def chat(config: LlmConfig, prompt: str) -> str:
    if not config.base_url or not config.model:
        raise EditorError("LLM editor needs base_url and model (COEVO_LLM_BASE_URL, COEVO_LLM_MODEL)")
    body = json.dumps({"model": config.model, "temperature": config.temperature,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(config.base_url.rstrip("/") + "/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {config.api_key}"} if config.api_key else {})})
    try:
        with urllib.request.urlopen(req, timeout=config.timeout_s) as resp:
            reply = json.loads(resp.read())
        return reply["choices"][0]["message"]["content"]
    except (urllib.error.URLError, TimeoutError, KeyError, IndexError, json.JSONDecodeError) as e:
        raise EditorError(f"LLM endpoint {config.base_url}: {e}") from None


@EDITORS.register("llm")
def llm_edit(parent: dict, *, scores: dict, failures: list[dict], llm: LlmConfig | None = None,
             fixed_task_options=(), **_) -> Edit:
    spec, rationale = parse_reply(chat(llm or LlmConfig(), build_prompt(parent, scores, failures)))
    if spec["task"] != parent["spec"]["task"]:
        raise EditorError(f"reply changed the task {parent['spec']['task']!r} -> {spec['task']!r}")
    task = task_class(spec["task"])
    before, after = (task.options_in_force(s.get("task_options")) for s in (parent["spec"], spec))
    changed = [k for k in fixed_task_options if before.get(k) != after.get(k)]
    if changed:
        raise EditorError(f"reply changed fixed task options {changed}")
    return Edit(spec, rationale, "llm")
