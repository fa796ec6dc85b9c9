"""Local services for tests and benchmarks: a free loopback port and a Ray head of one's own."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def ray_head(temp_dir, *, cpus: int = 2, timeout_s: float = 120.0):
    """`ray start --head --block` on loopback with fixed free ports; yields its dashboard address (what
    `JobSubmissionClient` and `$RAY_ADDRESS` take). Only this head is torn down, by its process group."""
    from ray.job_submission import JobSubmissionClient
    port, dash = free_port(), free_port()
    proc = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
                             "--node-ip-address=127.0.0.1", f"--port={port}", "--dashboard-host=127.0.0.1",
                             f"--dashboard-port={dash}", f"--num-cpus={cpus}", "--object-store-memory=100000000",
                             "--disable-usage-stats", f"--temp-dir={temp_dir}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                JobSubmissionClient(address).list_jobs()
                break
            except Exception:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the Ray head on {address} did not come up within {timeout_s:.0f} s") from None
                time.sleep(1)
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its graceful stop takes half a minute; the head is ours alone
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
