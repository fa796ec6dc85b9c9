"""Worker process entry: run one ms-swift SFT job described by a JSON file, write result.json beside it."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# ms-swift templates tried, in order, when a job names none; the first that encodes a probe conversation
# token for token as the model's own chat template does is used, so training sees what inference sees
TEMPLATE_CANDIDATES = ("chatml", "qwen3_nothinking", "llama3", "qwen2_5")
PROBE = [{"role": "system", "content": "You control a smart home."},
         {"role": "user", "content": "Turn on the lamp."},
         {"role": "assistant", "content": '[{"name": "lamp.turn_on", "args": {}}]'},
         {"role": "user", "content": "lamp.turn_on(): ok"},
         {"role": "assistant", "content": "done"}]


def matching_template(model_dir: str, model_type: str) -> str:
    """The ms-swift template that reproduces the tokenizer's chat template exactly."""
    from swift.model import get_processor
    from swift.template import get_template

    processor = get_processor(model_dir, model_type=model_type, use_hf=True, check_model=False)
    want = processor.apply_chat_template(PROBE, tokenize=True)
    want = list(want["input_ids"] if hasattr(want, "keys") else want)
    for name in TEMPLATE_CANDIDATES:
        template = get_template(processor, template_type=name)
        template.set_mode("train")
        if list(template.encode({"messages": PROBE})["input_ids"]) == want:
            return name
    raise SystemExit(f"{model_dir}: no ms-swift template among {TEMPLATE_CANDIDATES} encodes like the "
                     "tokenizer's chat template; set the SFT job's template")


def main(job_file: str) -> None:
    from engine.train.sft import SftJob, swift_arguments

    path = Path(job_file)
    job = SftJob.model_validate_json(path.read_text())
    from swift import SftArguments, sft_main

    kw = swift_arguments(job)
    if kw["template"] is None:
        kw["template"] = matching_template(job.model_dir, kw["model_type"])
        print(f"ms-swift template: {kw['template']} (matches the tokenizer's chat template)", flush=True)
    out = sft_main(SftArguments(**kw))
    if int(os.environ.get("RANK", "0")) == 0:
        result = {"last_model_checkpoint": out["last_model_checkpoint"], "template": kw["template"],
                  "log_history": out.get("log_history", [])}
        (path.parent / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
