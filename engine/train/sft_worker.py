"""Worker process entry: run one ms-swift SFT job described by a JSON file, write result.json beside it."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(job_file: str) -> None:
    from engine.train.sft import SftJob, swift_arguments

    path = Path(job_file)
    job = SftJob.model_validate_json(path.read_text())
    from swift import SftArguments, sft_main

    out = sft_main(SftArguments(**swift_arguments(job)))
    rank = int(__import__("os").environ.get("RANK", "0"))
    if rank == 0:
        result = {"last_model_checkpoint": out["last_model_checkpoint"],
                  "log_history": out.get("log_history", [])}
        (path.parent / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
