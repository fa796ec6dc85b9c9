#!/usr/bin/env bash
# Creates .venv and installs CoEvo-RSI with its dependencies; does nothing when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.coevo-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # the CPU wheel first: an unpinned torch would pull several GB of CUDA libraries
  .venv/bin/python -m pip install -q torch==2.13.0
  DS_BUILD_OPS=0 .venv/bin/python -m pip install -q -e ".[test]"
  touch "$stamp"
fi
