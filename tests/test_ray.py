"""The ray executor against a real Ray head on loopback: a round's SFT, sampling and evaluation run as
Ray Jobs, the archive comes out as a local run's does, and a Ray job stopped mid-training fails its
engine job with the log's tail while a second `coevo run` finishes the round without duplicates."""
import os
import time
from pathlib import Path

import pytest

from conftest import coevo, copy_default
from test_rounds import _no_duplicates

from engine.archive import Archive
from engine.testing.local import ray_head as local_ray_head


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """A Ray head of this module's own on loopback."""
    with local_ray_head(tmp_path_factory.mktemp("ray")) as address:
        yield address


def shape(path) -> dict:
    """What a run leaves, without its ids and numbers: tables, steps, lineage roles, decision kinds."""
    with Archive(path, readonly=True) as a:
        q = a.query
        return {"tables": {r["name"]: bool(q(f"SELECT 1 FROM {r['name']} LIMIT 1")[0:1]) for r in
                           q("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'jobs'")},
                "steps": sorted(r["step"] for r in q("SELECT step FROM round_steps WHERE state = 'done'")),
                "roles": sorted(r["role"] for r in q("SELECT role FROM checkpoint_parents")),
                "kinds": sorted(r["kind"] for r in q("SELECT kind FROM checkpoints")),
                "decisions": sorted(r["kind"] for r in q("SELECT kind FROM decisions")),
                "splits": sorted({r["split"] for r in q("SELECT split FROM evaluations")}),
                "rounds": [r["state"] for r in q("SELECT state FROM rounds")]}


@pytest.mark.slow
def test_a_round_runs_its_steps_as_ray_jobs_and_survives_a_stopped_job(ray_head, small_default, tmp_path):
    from ray.job_submission import JobStatus, JobSubmissionClient
    import yaml
    client = JobSubmissionClient(ray_head)
    path = copy_default(small_default, tmp_path / "ray")
    root = Path(small_default[0]).parent
    env = {**os.environ, "RAY_ADDRESS": ray_head}
    run = yaml.safe_load((root / "run.yaml").read_text())
    run["sample"]["min_kept"] = 1  # the tiny model keeps few successes: the round must train all the same
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    args = ("--config", str(root / "init.yaml"), "--run-config", str(tmp_path / "run.yaml"))

    # an engine job running the round on Ray; its SFT's Ray job is stopped mid-training
    out = coevo("job", "start", "round", "--executor", "ray", "--arg", f"run_config={tmp_path / 'run.yaml'}",
                "--archive", str(path), env=env)
    job_id = int(out.stdout.split()[1])
    deadline = time.time() + 240
    while True:
        sft = [j for j in client.list_jobs() if "-sft-" in (j.metadata or {}).get("coevo_key", "")]
        if sft and sft[0].status == JobStatus.RUNNING:
            break
        assert time.time() < deadline, "no SFT job started on Ray"
        time.sleep(0.5)
    time.sleep(2)
    client.stop_job(sft[0].submission_id)
    while True:
        with Archive(path, readonly=True) as a:
            job = a.job(job_id)
        if job["state"] not in ("queued", "running"):
            break
        assert time.time() < deadline
        time.sleep(0.5)
    assert job["state"] == "failed" and f"ray job {sft[0].submission_id} (sft) STOPPED" in job["error"], job
    assert "its log ends:" in job["error"]
    _no_duplicates(path)

    # the same round again, from the command line: it resumes at the SFT step and finishes
    out = coevo("run", "--rounds", "1", "--executor", "ray", "--archive", str(path), *args, env=env)
    assert "score" in out.stdout, out.stdout + out.stderr
    _no_duplicates(path)
    keys = {}
    for j in client.list_jobs():
        step = (j.metadata or {}).get("coevo_key", "").split("-")[1:3]
        keys.setdefault("-".join(step), []).append(j.status)
    assert JobStatus.SUCCEEDED in keys["r1-sample"] and JobStatus.SUCCEEDED in keys["sft-sft"]
    assert any(k.startswith("eval-") and JobStatus.SUCCEEDED in v for k, v in keys.items())
    with Archive(path, readonly=True) as a:
        assert a.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ckpt = a.checkpoint(a.step_result(1, "sft")["checkpoint"])
        assert ckpt["recipe"]["executor"] == "ray"
        ev = a.evaluation(a.step_result(1, "evaluate")["evaluation"])
        assert ev["turns"] == len(a.turns(ev["id"])) > 0
    # the same round run locally leaves an archive of the same shape
    local = copy_default(small_default, tmp_path / "local")
    coevo("run", "--rounds", "1", "--archive", str(local), *args)
    assert shape(path) == shape(local)


def test_the_gpu_profile_launches_zero3_under_torchrun_with_the_gpus_ray_grants(archive, tmp_path):
    """No GPU here: the launch is checked as data (Ray's resources, torchrun's arguments, ms-swift's)."""
    import json

    from engine.checkpoints import SftRequest, train
    from engine.executors import RayExecutor
    from engine.run_config import ExecutorConfig
    from engine.train.sft import SftJob, launch_command, swift_arguments

    base = archive.add_checkpoint(name="base", path=str(tmp_path / "base"), kind="base")
    data = archive.add_dataset(path=tmp_path / "d.jsonl", task="smart_home", source="gold", tasks_tried=1,
                               samples=1, kept=1)
    calls = []

    class Recording(RayExecutor):
        def run(self, job, *, key, gpus=0, cpus=1, log=print):
            calls.append((job, key, gpus))
            out = Path(job["sft"]["output_dir"])
            out.mkdir(parents=True)
            (out / "config.json").write_text("{}")
            return {"path": str(out)}

    ex = Recording(ExecutorConfig(kind="ray", address="http://head:8265", sft_gpus=4), tmp_path / "shared")
    (built,) = train(archive, [SftRequest(base, data, "sft-gpu", "gpu", 3)], executor=ex, log=lambda m: None)
    (job, key, gpus), = calls
    assert gpus == 4 and built.path == tmp_path / "shared" / "checkpoints" / "sft-gpu"
    sft = SftJob.model_validate(job["sft"])
    cmd, env = launch_command(Path("/shared/job.json"), sft.profile)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node=4"] and env["NPROC_PER_NODE"] == "4"
    kw = swift_arguments(sft.model_copy(update={"model_dir": "/nonexistent"}))
    assert (kw["deepspeed"], kw["bf16"], kw["torch_dtype"], kw["learning_rate"], kw["per_device_train_batch_size"],
            kw["optim"], kw["tuner_type"]) == ("zero3", True, "bfloat16", 5e-6, 1, "adamw_torch", "full")
    submit = ex.submit_kwargs(Path("/shared/remote/jobs/coevo-x.json"), key, gpus=gpus)
    assert submit["entrypoint_num_gpus"] == 4 and submit["metadata"] == {"coevo_key": key}
    assert submit["entrypoint"].endswith("-m engine.remote /shared/remote/jobs/coevo-x.json")
    # a CPU profile asks Ray for no GPU
    calls.clear()
    train(archive, [SftRequest(base, data, "sft-cpu", "cpu", 3)], executor=ex, log=lambda m: None)
    assert calls[0][2] == 0 and json.dumps(calls[0][0]).count("nproc_per_node\": null") == 1
