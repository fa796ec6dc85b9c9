"""Executors: where the heavy steps of a run execute. `local` is this machine (today's worker
processes, nothing here); `ray` submits each step as a Ray Job (`python -m engine.remote JOB.json`)
through Ray's JobSubmissionClient and waits for it. A remote job is a pure function of its job file;
its outputs land under the storage root both sides mount, and the head registers them, so the archive
keeps one writer. A failed or stopped job raises with the tail of its log; a step re-run after a kill
first stops the jobs an earlier attempt left running."""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
import uuid
from pathlib import Path

from engine.errors import CoevoError
from engine.registry import Registry
from engine.run_config import ExecutorConfig

EXECUTORS: Registry = Registry("executor")


class RemoteError(CoevoError):
    """A remote job failed or was stopped; the message ends with its log's tail."""


def get_executor(cfg: ExecutorConfig, storage_default: Path):
    """The executor of a config; None for `local` (the run's own processes do the work)."""
    return None if cfg.kind == "local" else EXECUTORS.get(cfg.kind)(cfg, storage_default)


@EXECUTORS.register("ray")
class RayExecutor:
    kind = "ray"

    def __init__(self, cfg: ExecutorConfig, storage_default: Path):
        self.cfg = cfg
        self.address = cfg.address or os.environ.get("RAY_ADDRESS")
        if not self.address:
            raise CoevoError("the ray executor needs a cluster address: set RAY_ADDRESS (http://HEAD:8265) or "
                             "executor.address")
        self.root = Path(cfg.storage or storage_default).resolve()
        self.storage = self.root / "remote"
        self.python = cfg.python or sys.executable
        self._client = None

    @property
    def client(self):
        if self._client is None:
            from ray.job_submission import JobSubmissionClient
            self._client = JobSubmissionClient(self.address)
        return self._client

    def submit_kwargs(self, job_file: Path, key: str, *, gpus: int = 0, cpus: int = 1) -> dict:
        """The Ray Jobs submission of one job file: entrypoint, resources, the step key as metadata."""
        env = {"TOKENIZERS_PARALLELISM": "false"}
        return dict(entrypoint=f"{shlex.quote(self.python)} -m engine.remote {shlex.quote(str(job_file))}",
                    submission_id=job_file.stem, metadata={"coevo_key": key},
                    entrypoint_num_cpus=cpus, entrypoint_num_gpus=gpus or None,
                    runtime_env={"env_vars": env})

    def run(self, job: dict, *, key: str, gpus: int = 0, cpus: int = 1, log=print) -> dict:
        """Run one job to its end; its result. `key` names the step: jobs an earlier attempt of the same
        step left running are stopped first, so two never write the same outputs."""
        from ray.job_submission import JobStatus
        self.stop_stale(key)
        folder = self.storage / "jobs"
        folder.mkdir(parents=True, exist_ok=True)
        job_file = folder / f"coevo-{key}-{uuid.uuid4().hex[:8]}.json"
        job_file.write_text(json.dumps(job))
        sid = self.client.submit_job(**self.submit_kwargs(job_file, key, gpus=gpus, cpus=cpus))
        log(f"  ray job {sid} ({job['kind']}) submitted to {self.address}")
        while (status := self.client.get_job_status(sid)) not in (JobStatus.SUCCEEDED, JobStatus.FAILED,
                                                                   JobStatus.STOPPED):
            time.sleep(self.cfg.poll_s)
        result = job_file.with_name(job_file.stem + ".result.json")
        if status != JobStatus.SUCCEEDED or not result.exists():
            tail = (self.client.get_job_logs(sid) or "")[-3000:]
            raise RemoteError(f"ray job {sid} ({job['kind']}) {status.value}; its log ends:\n{tail}")
        return json.loads(result.read_text())

    def stop_stale(self, key: str) -> None:
        from ray.job_submission import JobStatus
        for j in self.client.list_jobs():
            if (j.metadata or {}).get("coevo_key") == key and j.status in (JobStatus.PENDING, JobStatus.RUNNING):
                self.client.stop_job(j.submission_id)
                while self.client.get_job_status(j.submission_id) in (JobStatus.PENDING, JobStatus.RUNNING):
                    time.sleep(0.2)


def step_key(archive_path, *parts) -> str:
    """A name for one step of one archive, the same on every attempt (Ray submission ids allow [-a-z0-9])."""
    import hashlib
    import re
    digest = hashlib.sha256(str(Path(archive_path).resolve()).encode()).hexdigest()[:8]
    return re.sub(r"[^a-z0-9-]+", "-", "-".join([digest, *(str(p) for p in parts)]).lower())[:120]


def rollout_job(kind: str, *, spec: dict, task: str, data_dir, split: str, checkpoint: str, backend: dict,
                limit: int | None = None, item_ids: list[str] | None = None, **extra) -> dict:
    """The job file of a rollout or sampling job: everything it reads, named by path."""
    return {"kind": kind, "spec": spec, "task": task, "data_dir": str(Path(data_dir).resolve()), "split": split,
            "limit": limit, "item_ids": item_ids, "checkpoint": str(checkpoint), "backend": backend, **extra}
