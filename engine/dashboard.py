"""Serving the dashboard: `streamlit run app/main.py` over an archive, on loopback unless a token
guards it. The engine only builds and starts the command; it never imports streamlit."""
from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from engine import REPO_ROOT
from engine.config import load_yaml
from engine.errors import CoevoError

TOKEN_ENV = "COEVO_DASHBOARD_TOKEN"
ENTRY = REPO_ROOT / "app" / "main.py"


class DashboardConfig(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8501
    token: str | None = None  # required when host is not a loopback address
    present: bool = False     # presentation mode: Streamlit's developer toolbar hidden


def load_dashboard_config(path=None, **overrides) -> DashboardConfig:
    cfg = load_yaml(DashboardConfig, path) if path else DashboardConfig()
    cfg = cfg.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    if not cfg.token and os.environ.get(TOKEN_ENV):
        cfg = cfg.model_copy(update={"token": os.environ[TOKEN_ENV]})
    return cfg


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def command(archive: Path, cfg: DashboardConfig) -> tuple[list[str], dict]:
    """The streamlit command line and its environment; refuses an unguarded non-loopback bind."""
    if not is_loopback(cfg.host) and not cfg.token:
        raise CoevoError(f"refusing to serve the dashboard on {cfg.host}: beyond loopback it needs a token "
                         f"(set {TOKEN_ENV} or `token:` in the dashboard config)")
    if not Path(archive).exists():
        raise CoevoError(f"{archive}: no archive here (run `coevo run` first)")
    cmd = [sys.executable, "-m", "streamlit", "run", str(ENTRY), "--server.headless", "true",
           "--server.address", cfg.host, "--server.port", str(cfg.port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal" if cfg.present else "auto"]
    env = {**os.environ, "COEVO_ARCHIVE": str(Path(archive).resolve())}
    env.pop(TOKEN_ENV, None)
    if cfg.token:
        env[TOKEN_ENV] = cfg.token
    return cmd, env


def url(cfg: DashboardConfig) -> str:
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    return f"http://{host}:{cfg.port}/"


def serve(archive: Path, cfg: DashboardConfig) -> int:
    """Run the dashboard in the foreground until interrupted."""
    cmd, env = command(archive, cfg)
    print(f"CoEvo-RSI dashboard over {Path(archive).resolve()}: {url(cfg)}"
          + ("  (token required)" if cfg.token else "") + "  (Ctrl-C stops it)", flush=True)
    proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return proc.wait()
