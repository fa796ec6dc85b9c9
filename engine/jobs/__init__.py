"""Engine jobs for the dashboard and the CLI: a round, an evaluation, an SFT or a merge runs in a detached
worker process (`engine.jobs.worker`) that records its state, progress and result in the archive's
`jobs` table and writes its output to `<archive>.d/jobs/<id>.log`. Closing the dashboard stops nothing;
`cancel` stops a job and its children. Importing this package does not import torch.

    job_id = submit("archive.db", "eval", {"harness": "h1", "checkpoint": "c2", "limit": 8})
    archive.job(job_id)  # state, progress / total, message, result, error
"""
from engine.jobs.kinds import JOB_KINDS, JobArgs, validate_args
from engine.jobs.runner import cancel, job_log_path, log_tail, reap, submit, worker_alive

__all__ = ["JOB_KINDS", "JobArgs", "cancel", "job_log_path", "log_tail", "reap", "submit", "validate_args",
           "worker_alive"]
