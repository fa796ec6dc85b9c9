"""The `coevo` command."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from engine.archive import DEFAULT_PATH, Archive
from engine.errors import CoevoError, InputError
from engine.models import BACKENDS
from engine.models.gguf import BRAINS
from engine.run_config import CHOICE_FIELDS, choices

BRAIN_NAMES = BRAINS.names()


def _archive(args, readonly: bool = False) -> Archive:
    return Archive(args.archive, readonly=readonly)


def cmd_init(args) -> None:
    from engine.init import init, load_init_config
    with _archive(args) as archive:
        init(archive, load_init_config(args.config, args.task, args.brain), base_model=args.base_model)
        print(f"archive {archive.path}: {len(archive.harnesses())} harnesses, {len(archive.checkpoints())} checkpoints")


def cmd_model_import(args) -> None:
    from engine.models.gguf import import_gguf, provenance
    out = import_gguf(args.source, args.out)
    prov = provenance(out)
    print(f"{prov.get('brain') or prov['gguf']}: {prov.get('package', 'file')} {prov.get('version', '')} "
          f"sha256 {prov['sha256'][:16]}")
    print(out)


def cmd_eval(args) -> None:
    from engine.evaluate import evaluate
    with _archive(args) as archive:
        checkpoint = args.checkpoint
        if args.backend == "openai":  # a served model: registered once by name as an endpoint checkpoint
            from engine.checkpoints import register_endpoint
            if not (args.base_url and args.model):
                raise InputError("--backend openai needs --base-url and --model", field="--base-url")
            checkpoint = register_endpoint(archive, args.model, args.base_url, args.model,
                                           api_key_env=args.api_key_env, concurrency=args.concurrency,
                                           timeout_s=args.timeout)
        elif not checkpoint:
            raise InputError("give --checkpoint (or --backend openai --base-url URL --model NAME)", field="--checkpoint")
        backend = None
        if args.backend not in (None, "openai"):
            from engine.models import BackendSpec
            backend = BackendSpec(name=args.backend)
        r = evaluate(archive, args.harness, checkpoint, args.task, args.split, data_dir=args.data,
                     limit=args.limit, progress=_progress(args), backend_spec=backend)
        print(f"evaluation {r['id']}: {r['harness_id']} x {r['checkpoint_id']} on {args.task}/{args.split}: "
              f"score {r['score']:.3f}  TIMR {r['timr']:.1%} ({r['mismatched_turns']}/{r['turns']} turns)  "
              f"{r['tokens']} tokens in {r['seconds']:.1f}s")


def _run_config(args):
    from engine.run_config import load_run_config, with_executor
    cfg = load_run_config(args.run_config, task=args.task, brain=args.brain, mode=args.mode, gate=args.gate,
                          seed=args.seed, inheritance=args.inheritance, editor=args.editor)
    return with_executor(cfg, args.executor)


def _configs(args):
    """The init and round configs of one task; they must agree on it."""
    from engine.init import load_init_config
    config = load_init_config(args.config, args.task, args.brain)
    cfg = _run_config(args)
    if cfg.task != config.task:
        raise CoevoError(f"the init config is for task {config.task!r} but the round config for {cfg.task!r}: "
                         "pass --task, or configs of one task")
    return config, cfg


def cmd_run(args) -> None:
    """The main job: build the embedded default (once), evaluate the seed harnesses under the roots,
    then run rounds of co-evolution; resumes where a killed run stopped."""
    from engine.evaluate import evaluate_seed_matrix
    from engine.evolve.rounds import RoundRunner, Waiting
    from engine.init import init
    t0 = time.time()
    config, cfg = _configs(args)
    with _archive(args) as archive:
        init(archive, config, base_model=args.base_model)
        evaluate_seed_matrix(archive, config.task, cfg.split, include_base=bool(args.base_model),
                             backend_spec=cfg.backend, log=print)
        print_matrix(archive, config.task, cfg.split)
        if args.rounds:
            runner = RoundRunner(archive, cfg, log=lambda m: print(m, flush=True))
            try:
                summary = runner.run(args.rounds)
            except Waiting as w:
                print(f"\nwaiting: {w}")
                return
            print(f"\n{'round':<7}{'mode':<16}{'harness':<10}{'checkpoint':<12}{'score':>8}{'TIMR':>9}")
            for r in summary:
                print(f"{r['round']:<7}{r['mode']:<16}{r['harness']:<10}{r['checkpoint']:<12}{r['score']:>8.3f}"
                      f"{r['timr']:>9.1%}")
    print(f"done in {time.time() - t0:.0f}s")


def cmd_approve(args) -> None:
    from engine.evolve.decisions import approve
    with _archive(args) as archive:
        d = approve(archive, args.decision, by=args.by, comment=args.comment)
        print(f"decision {d['id']} approved by {d['decided_by']}: {d['choice']}")


def cmd_override(args) -> None:
    from engine.evolve.decisions import override
    with _archive(args) as archive:
        d = override(archive, args.decision, args.choice, by=args.by, comment=args.comment)
        print(f"decision {d['id']} overridden by {d['decided_by']}: {d['choice']}")


def cmd_ablate(args) -> None:
    from engine.evaluate import evaluate_seed_matrix
    from engine.evolve.ablate import ablate, format_table
    from engine.init import init
    config, cfg = _configs(args)
    with _archive(args) as archive:
        init(archive, config)
        evaluate_seed_matrix(archive, config.task, cfg.split, backend_spec=cfg.backend, log=print)
        table = ablate(archive, cfg, args.rounds, log=lambda m: print(m, flush=True))
    print("\n" + format_table(table))


def print_matrix(archive: Archive, task: str, split: str) -> None:
    cells = {(r["harness"], r["checkpoint"]): r for r in archive.matrix(task, split)}
    hs = [h for h in archive.harnesses() if any(k[0] == h["id"] for k in cells)]
    cs = [c for c in archive.checkpoints() if any(k[1] == c["id"] for k in cells)]
    width = 22
    print(f"\n{task}/{split}: score / TIMR per harness (rows) x checkpoint (columns)")
    print(" " * 28 + "".join(f"{c['id'] + ' ' + c['name']:>{width}}" for c in cs))
    for h in hs:
        row = f"{h['id'] + ' ' + h['name']:<28}"
        for c in cs:
            r = cells.get((h["id"], c["id"]))
            cell = f"{r['score']:.2f} / {r['timr']:.0%}" if r else "-"
            row += f"{cell:>{width}}"
        print(row)


def cmd_matrix(args) -> None:
    if not args.fill:
        with _archive(args, readonly=True) as archive:
            print_matrix(archive, args.task, args.split)
        return
    from engine.matrix import fill, fill_settings
    with _archive(args) as archive:
        backend, limit = fill_settings(archive, args.task)
        r = fill(archive, args.task, args.split, args.top, limit=limit, backend_spec=backend, log=print)
        print(f"filled: {len(r['evaluated'])} pairs evaluated, {r['skipped']} already were")
        print_matrix(archive, args.task, args.split)


def cmd_baselines(args) -> None:
    from engine.baselines import format_table, run_baselines
    with _archive(args) as archive:
        table = run_baselines(archive, args.task, args.split, limit=args.limit, log=print)
    if not table:
        raise CoevoError("nothing to compare: register a served model with `coevo eval --backend openai ...`")
    print(f"\n{args.task}/{args.split}: the best co-evolved pair against the served models")
    print(format_table(table))


def cmd_steer(args) -> None:
    from engine.evolve import steering
    with _archive(args) as archive:
        if args.act == "harness":
            from pathlib import Path
            path = Path(args.target)
            if not path.is_file():
                raise InputError("file not found", path=path)
            d = steering.submit_harness(archive, path.read_text(encoding="utf-8"), by=args.by, why=args.why,
                                        parent=args.parent, source=str(path))
            print(f"decision {d['id']}: harness {d['choice']} is the next round's candidate ({args.by})")
        else:
            d = getattr(steering, args.act)(archive, args.target, by=args.by, why=args.why)
            print(f"decision {d['id']}: {args.act} {d['choice']} by {d['decided_by']}")


def cmd_pause(args) -> None:
    from engine.evolve import steering
    with _archive(args) as archive:
        d = getattr(steering, args.command)(archive, by=args.by, why=args.why)
        print(f"decision {d['id']}: {args.command}d by {d['decided_by']}"
              + (" (runs stop before their next step)" if args.command == "pause" else ""))


def cmd_status(args) -> None:
    with _archive(args, readonly=True) as archive:
        summary = archive.summary()
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"{summary['archive']} (schema {summary['schema_version']}, version {summary['version']})")
    print(f"harnesses: {len(summary['harnesses'])}")
    for h in summary["harnesses"]:
        print(f"  {h['id']:<6} {h['name']:<28} {h['interface']:<10} {h['creator']}")
    print(f"checkpoints: {len(summary['checkpoints'])}")
    for c in summary["checkpoints"]:
        print(f"  {c['id']:<6} {c['name']:<28} {c['kind']:<6} harness={c['harness_id']}")
    print(f"evaluations: {len(summary['evaluations'])}")
    for e in summary["evaluations"]:
        print(f"  {e['id']:<6} {e['harness']:<6} x {e['checkpoint']:<6} {e['task']}/{e['split']:<8} "
              f"score {e['score']:.3f}  TIMR {e['timr']:.1%}  turns {e['turns']}")


def cmd_score(args) -> None:
    from engine.tasks import benchmark_task
    task = benchmark_task(args.benchmark)
    result = task.score_files(args.gold, args.pred, rule=args.rule, spider=args.spider)
    print(json.dumps(result, indent=1) if args.json else task.format_scores(result))


def cmd_sql_guard(args) -> None:
    from engine.tasks.rbac_sql.guard import guard_report
    report = guard_report(args.gold, spider_dir=args.spider)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(json.dumps({k: v for k, v in report.items() if k != "disagreements"}, indent=1))
    for d in report["disagreements"]:
        print(f"line {d['line']}: {json.dumps(d)}")


def _job_arg(item: str) -> tuple[str, object]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InputError(f"expected KEY=VALUE, got {item!r}", field="--arg")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def cmd_job_start(args) -> None:
    from engine.jobs import submit
    job_args = dict(_job_arg(a) for a in args.arg)
    if args.executor:
        job_args["executor"] = args.executor
    job_id = submit(args.archive, args.kind, job_args)
    print(f"job {job_id} started ({args.kind}): `coevo job show {job_id}` to follow it, "
          f"`coevo job cancel {job_id}` to stop it")


def _job_progress(job: dict) -> str:
    return f"{job['progress']:g}/{job['total']:g}" if job["total"] else f"{job['progress']:g}"


def cmd_job_list(args) -> None:
    from engine.jobs import reap
    with _archive(args, readonly=True) as archive:
        reap(archive)
        jobs = archive.jobs(args.state, args.limit)
    print(f"{'id':<6}{'kind':<8}{'state':<11}{'progress':<12}{'created (UTC)':<21}message")
    for j in jobs:
        created = j["created_at"][:19].replace("T", " ")
        print(f"{j['id']:<6}{j['kind']:<8}{j['state']:<11}{_job_progress(j):<12}{created:<21}{j['message']}")


def cmd_job_show(args) -> None:
    from engine.jobs import log_tail, reap
    with _archive(args, readonly=True) as archive:
        reap(archive)
        job = archive.job(args.job)
    print(f"job {job['id']}: {job['kind']} {json.dumps(job['args'])}")
    print(f"  state {job['state']}  progress {_job_progress(job)}  {job['message']}")
    print(f"  created {job['created_at']}  started {job['started_at']}  finished {job['finished_at']}  "
          f"pid {job['pid']}")
    if job["result"] is not None:
        print(f"  result {json.dumps(job['result'])}")
    if job["error"]:
        print(f"  error {job['error']}")
    if job["log_path"]:
        print(f"--- {job['log_path']} (last {args.lines} lines)")
        print(log_tail(job, args.lines))


def cmd_job_cancel(args) -> None:
    from engine.jobs import cancel
    job = cancel(args.archive, args.job)
    print(f"job {job['id']} cancelled")


def _progress(args):
    if not sys.stderr.isatty():
        return None
    return lambda done, total: print(f"\r  {done}/{total} episodes", end="" if done < total else "\n",
                                     file=sys.stderr, flush=True)


def cmd_dashboard(args) -> None:
    from engine.dashboard import load_dashboard_config, serve
    cfg = load_dashboard_config(args.config, host=args.host, port=args.port, present=args.present or None)
    serve(args.archive, cfg)


def cmd_report(args) -> None:
    from engine.report import write_report
    with _archive(args, readonly=True) as archive:
        out = write_report(archive, args.out)
    print(f"report: {out} ({out.stat().st_size / 2**20:.1f} MiB, self-contained)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coevo", description="Model-harness co-evolution.")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, fn, help, under=None):
        sp = (under or sub).add_parser(name, help=help, description=help)
        sp.add_argument("--archive", default=os.environ.get("COEVO_ARCHIVE", DEFAULT_PATH),
                        help="the archive file (default ./archive.db)")
        sp.set_defaults(fn=fn)
        return sp

    sp = command("init", cmd_init, "build the default model and archive, or register a local model")
    sp.add_argument("--base-model", help="a local Hugging Face causal-LM directory or .gguf file to register instead")
    sp.add_argument("--brain", choices=BRAIN_NAMES, help="a pretrained brain from a registry package, with its "
                                                          "preset assets/init/<task>-<brain>.yaml")
    sp.add_argument("--config", help="init config YAML (default assets/init/<task>.yaml)")
    sp.add_argument("--task", help="smart_home (default), failure_attribution or rbac_sql")

    def round_options(sp):
        sp.add_argument("--task", help="smart_home (default), failure_attribution or rbac_sql: picks the "
                                       "default configs assets/init/<task>.yaml and assets/run/<task>.yaml")
        sp.add_argument("--config", help="init config YAML (default assets/init/<task>.yaml)")
        sp.add_argument("--run-config", help="round config YAML (default assets/run/<task>.yaml)")
        sp.add_argument("--brain", choices=BRAIN_NAMES, help="a pretrained brain and its presets "
                                                              "assets/{init,run}/<task>-<brain>.yaml")
        sp.add_argument("--rounds", type=int, default=3)
        sp.add_argument("--seed", type=int)
        for name in CHOICE_FIELDS:
            sp.add_argument(f"--{name}", choices=choices(name))
        sp.add_argument("--executor", choices=["local", "ray"], help="where SFT, sampling and evaluation run: "
                        "this machine (default) or Ray Jobs on the cluster at $RAY_ADDRESS")

    sp = command("run", cmd_run, "the main job: init once, evaluate the seeds, run rounds of co-evolution")
    sp.add_argument("--base-model")
    round_options(sp)

    sp = command("ablate", cmd_ablate, "run every mode from the same start and print score / TIMR per round")
    round_options(sp)

    for name, fn in (("approve", cmd_approve), ("override", cmd_override)):
        sp = command(name, fn, f"{name} a pending decision")
        sp.add_argument("decision", type=int)
        if name == "override":
            sp.add_argument("--choice", required=True, help="another candidate")
        sp.add_argument("--by", default=os.environ.get("USER", "person"), help="who decides (for the audit trail)")
        sp.add_argument("--comment")

    sp = sub.add_parser("model", help="pretrained models", description="Pretrained models.")
    models = sp.add_subparsers(dest="model_command", required=True)
    sp = models.add_parser("import", help="write a Hugging Face model directory from a brain or a .gguf file "
                                          "and print its path", description="Write a Hugging Face model directory "
                                          "from a brain or a .gguf file; the last line printed is its path.")
    sp.add_argument("source", help=f"a brain ({', '.join(BRAIN_NAMES)}) or a .gguf file")
    sp.add_argument("--out", required=True, help="the model directory to write")
    sp.set_defaults(fn=cmd_model_import)

    sp = command("eval", cmd_eval, "evaluate a (harness, checkpoint) pair on a task split")
    sp.add_argument("--harness", required=True, help="harness id or name")
    sp.add_argument("--checkpoint", help="checkpoint id or name (not with --backend openai)")
    sp.add_argument("--backend", choices=BACKENDS.names(), help="the model backend (default transformers); openai: "
                                                                "a served model at --base-url named --model")
    sp.add_argument("--base-url", help="openai: the server's API root, e.g. http://127.0.0.1:8000/v1")
    sp.add_argument("--model", help="openai: the served model's name (the endpoint checkpoint's name too)")
    sp.add_argument("--api-key-env", default="OPENAI_API_KEY", help="openai: the environment variable holding "
                                                                    "the key (the key is never stored)")
    sp.add_argument("--concurrency", type=int, default=4, help="openai: requests in flight")
    sp.add_argument("--timeout", type=float, default=60.0, help="openai: seconds per request")
    sp.add_argument("--task", default="smart_home")
    sp.add_argument("--split", default="dev", help="a split name in the data folder, or a JSONL path")
    sp.add_argument("--data", help="the task's data folder (default: the archive's generated data)")
    sp.add_argument("--limit", type=int)

    sp = command("matrix", cmd_matrix, "print the score/TIMR matrix of harnesses x checkpoints; --fill "
                                       "evaluates every pair of the top harnesses x top checkpoints")
    sp.add_argument("--task", default="smart_home")
    sp.add_argument("--split", default="dev")
    sp.add_argument("--fill", action="store_true", help="evaluate the missing pairs of the top K x top K (and "
                                                        "the newest round's pair) in full")
    sp.add_argument("--top", type=int, default=4, help="K: harnesses and checkpoints by best score (default 4)")

    sp = command("baselines", cmd_baselines, "evaluate the served models (endpoint checkpoints) under the seed "
                                              "harnesses and the best co-evolved pair on a split; print the table")
    sp.add_argument("--task", default="smart_home")
    sp.add_argument("--split", default="test")
    sp.add_argument("--limit", type=int, help="items per evaluation (default all)")

    def who(sp):
        sp.add_argument("--by", default=os.environ.get("USER", "person"), help="who acts (for the audit trail)")
        sp.add_argument("--why", help="why (for the audit trail)")

    sp = command("steer", cmd_steer, "steer the next round: enter a harness, pin a checkpoint, exclude or "
                                     "include one for inheritance")
    sp.add_argument("act", choices=["harness", "pin", "exclude", "include"])
    sp.add_argument("target", help="harness: a harness YAML file; else a checkpoint id or name")
    sp.add_argument("--parent", help="harness: the harness it was edited from")
    who(sp)
    for name in ("pause", "resume"):
        sp = command(name, cmd_pause, "pause runs of the archive before their next step" if name == "pause"
                     else "let paused runs go on")
        who(sp)

    sp = command("status", cmd_status, "summarize the archive")
    sp.add_argument("--json", action="store_true")

    sp = command("score", cmd_score, "score predictions with a benchmark's official metric")
    sp.add_argument("benchmark", help="homebench, whowhen or rbac-sql (or the task's name: smart_home, ...)")
    sp.add_argument("--gold", required=True, help="gold rows (JSONL), or for whowhen the folder of trace files")
    sp.add_argument("--pred", required=True, help="predictions (JSONL)")
    sp.add_argument("--rule", choices=["exact", "substring"], default="exact",
                    help="whowhen: exact match, or the official script's gold-is-a-substring rule")
    sp.add_argument("--spider", help="rbac-sql: a Spider folder with database/<db_id>/<db_id>.sqlite "
                                     "(default: build each database from the rows' schema_ddl)")
    sp.add_argument("--json", action="store_true")

    sp = sub.add_parser("sql", help="the SQL permission guard", description="The SQL permission guard.")
    sql = sp.add_subparsers(dest="sql_command", required=True)
    sp = command("guard", cmd_sql_guard, "run each row's gold query under its role through the guard and "
                 "print the agreement with the row's label", under=sql)
    sp.add_argument("--gold", required=True, help="Spider-AC rows (JSONL)")
    sp.add_argument("--spider", help="a Spider folder with database/<db_id>/<db_id>.sqlite "
                                     "(default: build each database from the rows' schema_ddl)")
    sp.add_argument("--json", action="store_true")

    sp = sub.add_parser("job", help="start, list, show or cancel a job run by a detached worker",
                        description="Jobs (a round, an evaluation, an SFT, a merge) run in a detached worker process; "
                                    "the dashboard starts the same jobs.")
    jobs = sp.add_subparsers(dest="job_command", required=True)
    sp = command("start", cmd_job_start, "start a job and return at once", under=jobs)
    sp.add_argument("kind", help="round, eval, sft, merge, matrix or sleep")
    sp.add_argument("--executor", choices=["local", "ray"], help="round, eval, sft, merge: where the work runs "
                                                                 "(ray: the cluster at $RAY_ADDRESS)")
    sp.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                    help="a job argument, repeatable; the value is read as JSON when it parses "
                         "(limit=4, models='[\"c2\",\"c3\"]'), else as a string")
    sp = command("list", cmd_job_list, "list jobs, newest first", under=jobs)
    sp.add_argument("--state", choices=["queued", "running", "done", "failed", "cancelled"])
    sp.add_argument("--limit", type=int, default=20)
    sp = command("show", cmd_job_show, "a job's row and the tail of its log", under=jobs)
    sp.add_argument("job", type=int)
    sp.add_argument("--lines", type=int, default=40)
    sp = command("cancel", cmd_job_cancel, "cancel a queued or running job (its worker and children stop)",
                 under=jobs)
    sp.add_argument("job", type=int)

    sp = command("dashboard", cmd_dashboard, "serve the Streamlit dashboard over the archive")
    sp.add_argument("--host", help="address to bind (default 127.0.0.1; beyond loopback a token is required)")
    sp.add_argument("--port", type=int, help="port (default 8501)")
    sp.add_argument("--config", help="dashboard config YAML: host, port, token (or $COEVO_DASHBOARD_TOKEN), present")
    sp.add_argument("--present", action="store_true", help="presentation mode: no developer toolbar")

    sp = command("report", cmd_report, "write one self-contained HTML report of the run (works offline)")
    sp.add_argument("--out", default="report.html", help="the HTML file to write (default report.html)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except (CoevoError, FileNotFoundError) as e:
        print(f"coevo {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
