"""Command line: `python cli.py compare --budget 100` and friends.

Commands parse options, call library functions and print; nothing heavy runs at import
(torch and triton are imported inside commands), so `--help` is instant. Bad input of any
kind ends with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

EXIT_BAD_INPUT = 2


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


_SOURCE_HELP = ("Load tasks from an external suite, ADAPTER:PATH (geak-eval:DIR or kernelbench:DIR); repeatable; "
                "replaces $KMC_TASK_SOURCES (the default). Skipped files and their reasons are reported on stderr.")


def source_option(command: Any) -> Any:
    """`--source ADAPTER:PATH` (repeatable), shared by every command that takes tasks."""
    return click.option("--source", "sources", multiple=True, metavar="ADAPTER:PATH", help=_SOURCE_HELP)(command)


def _sources(sources: tuple[str, ...]) -> list[str] | None:
    """The --source values, or None when none was given (then the default applies)."""
    return list(sources) if sources else None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Compare LLM kernel-writing methods at equal compute, on hidden tests, with error bars."""


@cli.command()
@click.option("--budget", type=int, default=None, help="LLM budget per (method, task, repeat) [default 100].")
@click.option("--budget-unit", type=click.Choice(["calls", "tokens", "output_tokens", "total_tokens"]), default=None,
              help="What the budget counts [default calls]; tokens = total_tokens.")
@click.option("--methods", default=None, help="Comma-separated methods [default direct,reflexion,geak].")
@click.option("--tasks", default=None, help="Comma-separated task ids (overrides --suite).")
@click.option("--suite", default=None, help="Task suite [default: quick without a GPU, full with one].")
@source_option
@click.option("--repeats", type=int, default=None, help="Independent repeats per (method, task) [default 1].")
@click.option("--seed", type=int, default=None, help="Run seed [default 0].")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="YAML or JSON file of options; command-line flags override it.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Folder for run folders [default runs/].")
@click.option("--resume", type=click.Path(path_type=Path), default=None, help="Finish an interrupted run folder.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint; without it the simulated model is used.")
@click.option("--model", default=None, help="Model name at the endpoint.")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key [OPENAI_API_KEY].")
@click.option("--device", type=click.Choice(["auto", "cpu"]), default=None,
              help="auto: GPU if present, else the Triton CPU interpreter; cpu: always the interpreter.")
@click.option("--workers", type=int, default=None, help="Evaluation worker processes [default: 2 per GPU; CPU: up to 4].")
@click.option("--worker-user", default=None, metavar="USER",
              help="Run evaluation workers as this unprivileged user, e.g. nobody (needs root). Off by default.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--max-concurrency", type=int, default=None, help="Model requests in flight at once [default 8].")
@click.option("--dry-run", is_flag=True, help="Print the calls, tokens and estimated cost the run would spend; spend nothing.")
@click.option("--replay", type=click.Path(path_type=Path), default=None,
              help="Re-run a recorded run folder from its recorded model responses, with no network.")
@click.option("--lock-clocks", "lock_spec", default=None, metavar="auto|SM[,MEM]",
              help="Lock GPU clocks for the run (needs root; restored on exit and Ctrl-C). Off by default.")
def compare(budget: int | None, budget_unit: str | None, methods: str | None, tasks: str | None, suite: str | None,
            repeats: int | None, seed: int | None, config_path: Path | None, out: Path | None, resume: Path | None,
            base_url: str | None, model: str | None, api_key_env: str | None, device: str | None,
            workers: int | None, quiet: bool, max_concurrency: int | None = None, dry_run: bool = False,
            replay: Path | None = None, lock_spec: str | None = None, worker_user: str | None = None,
            sources: tuple[str, ...] = ()) -> None:
    """Run every method on every task under one budget ledger, then judge on hidden tests."""
    from runners.config import CompareConfig, load_config_file

    if replay is not None and resume is not None:
        raise BadInput("--replay and --resume cannot be combined")
    data: dict[str, Any] = _replay_config(replay) if replay is not None else {}
    data.update(load_config_file(config_path) if config_path else {})
    flags = {"budget": budget, "budget_unit": budget_unit, "methods": _split(methods), "tasks": _split(tasks),
             "suite": suite, "repeats": repeats, "seed": seed, "device": device, "workers": workers,
             "worker_user": worker_user, "task_sources": _sources(sources)}
    data.update({k: v for k, v in flags.items() if v is not None})
    endpoint = dict(data.get("endpoint") or {})
    for key, value in (("base_url", base_url), ("model", model), ("api_key_env", api_key_env),
                       ("max_concurrency", max_concurrency)):
        if value is not None:
            endpoint[key] = value
    data["endpoint"] = endpoint
    config = CompareConfig.from_json(data)
    if dry_run:
        if resume is not None:
            raise BadInput("--dry-run estimates a new run; it cannot be combined with --resume")
        _dry_run(config)
        return
    if resume is not None and (config_path or any(v is not None for v in flags.values())):
        click.echo("note: --resume uses the run's recorded config; other run options are ignored", err=True)
    clocks = _parse_lock_spec(lock_spec)
    _run_compare(config, out, resume, quiet, replay, clocks)


def _parse_lock_spec(spec: str | None) -> tuple[int | None, int | None] | None:
    if spec is None:
        return None
    from runners.clock_lock import parse_lock_spec

    try:
        return parse_lock_spec(spec)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _clock_lock(target: Any, clocks: tuple[int | None, int | None] | None) -> Any:
    """A context that locks clocks for the run when asked, and does nothing otherwise."""
    import contextlib

    if clocks is None:
        return contextlib.nullcontext()
    if target.interpreter:
        raise BadInput("--lock-clocks needs a GPU; this run uses the CPU interpreter")
    from runners.clock_lock import ClockLockError, lock_clocks
    from runners.pool import visible_devices

    try:
        return lock_clocks(target.vendor, tuple(int(d) for d in visible_devices(target)), *clocks,
                           on_message=lambda m: click.echo(m, err=True))
    except (ClockLockError, ValueError) as exc:
        raise BadInput(f"cannot lock clocks: {exc}") from None


def _replay_config(run_dir: Path) -> dict[str, Any]:
    """The recorded run's options (with its resolved task list), for flags to override."""
    from results.run_folder import RunFolder, RunFolderError

    folder = RunFolder(run_dir)
    try:
        recorded = folder.read_config()
    except RunFolderError:
        raise BadInput(f"{run_dir} is not a recorded run folder (no readable config.json)") from None
    if not folder.has_store():
        raise BadInput(f"{run_dir} has no store.sqlite to replay")
    data = dict(recorded.config)
    if not data.get("tasks"):
        data["tasks"] = list(recorded.resolved.tasks)
    return data


def _make_client(config: Any) -> Any:
    from modelio.clients import EndpointUnreachable, make_client

    ep = config.endpoint
    try:
        return make_client(ep.base_url, ep.model, ep.api_key_env, ep.timeout_s, ep.max_retries, config.sim_params,
                           max_concurrency=ep.max_concurrency)
    except (EndpointUnreachable, ValueError) as exc:
        raise BadInput(str(exc)) from None


def _dry_run(config: Any) -> None:
    from methods.registry import create_method
    from modelio.dryrun import estimate
    from runners.compare import resolve_methods, resolve_tasks, start_target

    config.validate()
    target = start_target(config)
    tasks = resolve_tasks(config, target)
    methods = {name: create_method(name, opts) for name, opts in resolve_methods(config).items()}
    try:
        est = estimate(config.budget, config.budget_unit, methods, [t.view() for t in tasks], config.repeats,
                       target.vendor, config.endpoint.model or "", config.endpoint.simulated)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    click.echo(est.format())


def _run_compare(config: Any, out: Path | None, resume: Path | None, quiet: bool, replay: Path | None = None,
                 clocks: tuple[int | None, int | None] | None = None) -> None:
    from results.run_folder import RunFolder
    from results.summary import build_summary, format_table
    from runners.compare import CompareRun, local_executor, prepare_run, record_run_files, start_target

    client = None
    if replay is not None:
        from modelio.replay import ReplayClient
        from results.run_folder import RunFolder

        replayed = RunFolder(replay)
        resolved = replayed.read_config().resolved
        try:
            client = ReplayClient(replayed.store_path, model=resolved.model or None, simulated=resolved.simulated)
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot replay {replay}: {exc}") from None
    elif resume is None:
        config.validate()
        client = _make_client(config)  # before any run folder: an unreachable endpoint leaves nothing behind
    clock_lock = None
    if resume is None:
        clock_lock = _clock_lock(start_target(config), clocks)  # refused before any run folder exists
    config, run_dir, resumed = prepare_run(config, out, resume)
    target = start_target(config)
    if resumed:
        from results.run_folder import RunFolder

        recorded = RunFolder(run_dir).read_config().resolved
        if recorded.vendor != target.vendor:
            raise BadInput(f"{run_dir} ran on {recorded.vendor}; this machine is {target.vendor}")
        config.tasks = list(recorded.tasks)
    if client is None:
        client = _make_client(config)
    if clock_lock is None:
        clock_lock = _clock_lock(target, clocks)
    bar = None

    def on_progress(p: Any) -> None:
        if bar is not None:
            bar.total = p.total_units
            bar.n = p.units_done
            bar.set_postfix_str(f"spent {p.spent}/{p.budget_total} {config.budget_unit}", refresh=True)

    started = time.perf_counter()
    run = CompareRun(config, run_dir, client, target, progress=on_progress,
                     executor=local_executor(config, target, clocks_locked=clocks is not None))
    try:
        record_run_files(run, resumed)
        click.echo(f"run folder: {run_dir}" + (" (resumed)" if resumed else ""), err=True)
        if replay is not None:
            run.store.set_meta("replay_of", str(replay))
            click.echo(f"model: REPLAY of {replay} (recorded responses, no network)", err=True)
        elif client.simulated:
            where = getattr(client, "base_url", None)
            click.echo("model: built-in SIMULATED model " + (f"served by {where}" if where else "(no endpoint configured)"),
                       err=True)
        if not quiet:  # made only now, so the lines above are not printed through a half-drawn bar
            from tqdm import tqdm

            bar = tqdm(total=len(config.methods) * len(run.tasks) * config.repeats, unit="unit", desc="units",
                       dynamic_ncols=True, file=sys.stderr)
        try:
            with clock_lock:  # entered before the workers start, so their timings say clocks were locked
                run.run()
        except KeyboardInterrupt:
            if bar is not None:
                bar.close()
            click.echo(f"\ninterrupted: {run.progress.units_done} of {len(run.units)} units finished and recorded; "
                       f"finish with: python cli.py compare --resume {run_dir}", err=True)
            raise SystemExit(130) from None
        summary = build_summary(run.store, config.to_json(), client.simulated, client.model)
        RunFolder(run_dir).write_summary(summary)
    finally:
        if bar is not None:
            bar.close()
        run.close()
    click.echo(format_table(summary, target.interpreter))
    if hasattr(client, "stats"):
        s = client.stats()
        cost = "unknown (no price for this model)" if s.cost_usd is None else f"${s.cost_usd:.4f}"
        click.echo(f"endpoint: {s.calls} calls, {s.failed_calls} failed, {s.retries} retries; "
                   f"{s.prompt_tokens} prompt + {s.completion_tokens} completion tokens; estimated cost {cost}")
    click.echo(f"wall time {time.perf_counter() - started:.1f} s; summary: {RunFolder(run_dir).summary_path}")


@cli.command("eval")
@click.option("--task", "task_id", required=True, help="Task id.")
@click.option("--candidate", type=click.Path(path_type=Path, exists=True, dir_okay=False), required=True)
@click.option("--hidden/--visible", default=True, help="Judge on hidden cases (default) or visible ones.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--timeout", type=float, default=None, help="Seconds before the candidate is a timeout.")
@click.option("--worker-user", default=None, metavar="USER",
              help="Run the evaluation worker as this unprivileged user, e.g. nobody (needs root).")
@source_option
@click.option("--device", type=click.Choice(["auto", "cpu"]), default=None,
              help="auto: GPU if present, else the Triton CPU interpreter; cpu: always the interpreter "
                   "[default auto; cpu when $KMC_FORCE_CPU=1].")
def eval_command(task_id: str, candidate: Path, hidden: bool, as_json: bool, timeout: float | None,
                 worker_user: str | None, sources: tuple[str, ...] = (), device: str | None = None) -> None:
    """Judge one candidate file on a task."""
    from bench.registry import default_task_sources, get_task, load_sources, normalize_sources
    from judge.device import default_device, detect_target
    from judge.privileges import PrivilegeError
    from runners.pool import LocalPool

    target = detect_target(force_cpu=(device or default_device()) == "cpu")
    task_sources = normalize_sources(_sources(sources) or default_task_sources())
    load_sources(task_sources, target.vendor)
    task = get_task(task_id)
    try:
        pool = LocalPool(target, workers=1, job_timeout=timeout, worker_user=worker_user, task_sources=task_sources)
    except PrivilegeError as exc:
        raise BadInput(str(exc)) from None
    with pool:
        ev = pool.evaluate(task.id, candidate.read_text(), "hidden" if hidden else "visible",
                           timing=not target.interpreter)
    v = ev.verdict
    if as_json:
        click.echo(json.dumps({"verdict": v.kind, "failing_case": v.failing_case, "max_abs_err": v.max_abs_err,
                               "max_rel_err": v.max_rel_err, "message": v.message, "cases_run": v.cases_run,
                               "cases_skipped": v.cases_skipped, "skip_reasons": list(v.skip_reasons),
                               "timing": ev.timing.to_json() if ev.timing else None}))
    else:
        click.echo(v.one_line())
        if ev.timing:
            t = ev.timing
            ci = f"{t.speedup_ci[0]:.3f}-{t.speedup_ci[1]:.3f}" if t.speedup_ci else "n/a"
            click.echo(f"speedup vs expert baseline {t.speedup_vs_baseline:.3f}x "
                       f"(95% CI {ci}); vs eager {t.speedup_vs_eager or float('nan'):.3f}x"
                       + (f"; flagged: {', '.join(t.flag_reasons)}" if t.flagged else ""))
        elif target.interpreter:
            click.echo("timing: unavailable on the CPU interpreter")
    sys.exit(0 if v.correct else 1)


@cli.group()
def bench() -> None:
    """Inspect and check the task suites."""


def _load_sources(sources: tuple[str, ...], vendor: str | None = None) -> tuple[list[str], list[Any]]:
    """Load `ADAPTER:PATH` task sources (geak-eval, kernelbench), $KMC_TASK_SOURCES when none is
    given: (the sources, absolute, and the adapters' reports). Bad ones are bad input."""
    from bench.registry import TaskSourceError, default_task_sources, load_sources, normalize_sources

    try:
        task_sources = normalize_sources(_sources(sources) or default_task_sources())
        return task_sources, load_sources(task_sources, vendor)
    except TaskSourceError as exc:
        raise BadInput(str(exc)) from None


@bench.command("list")
@click.option("--suite", default=None, help="Only this suite.")
@source_option
@click.option("--json", "as_json", is_flag=True)
def bench_list(suite: str | None, sources: tuple[str, ...], as_json: bool) -> None:
    from bench.registry import all_tasks, suite_tasks

    _, reports = _load_sources(sources)
    tasks = suite_tasks(suite) if suite else all_tasks()
    rows: list[dict[str, Any]] = [{"id": t.id, "suites": list(t.suites), "category": t.category, "difficulty": t.difficulty,
             "dtypes": list(t.dtypes), "visible_cases": len(t.visible), "hidden_cases_gpu": len(t.hidden_gpu),
             "hidden_cases_cpu": len(t.hidden_cpu), "entry_point": t.entry_point, "signature": t.signature,
             "source": t.source}
            for t in tasks]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        if reports:
            click.echo(json.dumps({"sources": [r.to_json() for r in reports]}), err=True)
        return
    for r in rows:
        click.echo(f"{r['id']:<20} d{r['difficulty']} {','.join(r['suites']):<18} {','.join(r['dtypes']):<26} "
                   f"visible {r['visible_cases']}, hidden {r['hidden_cases_gpu']} (GPU) / {r['hidden_cases_cpu']} (CPU)")
    for rep in reports:
        c = rep.counts()
        click.echo(f"{rep.adapter} {rep.root}: {c['loaded']} tasks loaded, {c['skipped']} skipped", err=True)
        for s in rep.skipped:
            click.echo(f"  skipped {Path(s.path).name}: {s.reason}", err=True)


@bench.command("check")
@click.option("--suite", default=None, help="Suite to check [default: quick without a GPU, full with one].")
@click.option("--tasks", default=None, help="Comma-separated task ids (overrides --suite).")
@source_option
@click.option("--workers", type=int, default=None, help="Evaluation worker processes [default: 2 per GPU; CPU: up to 4].")
@click.option("--device", type=click.Choice(["auto", "cpu"]), default=None,
              help="auto: GPU if present, else the Triton CPU interpreter; cpu: always the interpreter "
                   "[default auto; cpu when $KMC_FORCE_CPU=1].")
@click.option("--timing-seconds", type=float, default=None,
              help="Cap on sampling time per perf case and timed function [default: the timing policy's 3 s].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_check(suite: str | None, tasks: str | None, sources: tuple[str, ...], workers: int | None, device: str | None,
                timing_seconds: float | None, as_json: bool) -> None:
    """Judge every expert baseline of a suite on its hidden cases; on a GPU also time it on its
    perf cases and report the fraction of the memory or compute roofline. Exit 1 if any fails."""
    from bench.check import format_report
    from bench.registry import get_task, suite_tasks
    from judge.device import default_device, detect_target
    from runners.check import run_check

    if workers is not None and workers < 1:
        raise BadInput("--workers must be at least 1")
    target = detect_target(force_cpu=(device or default_device()) == "cpu")
    task_sources, _ = _load_sources(sources, target.vendor)
    ids = _split(tasks)
    if ids:
        chosen = [get_task(i) for i in ids]
    else:
        chosen = suite_tasks(suite or ("quick" if target.interpreter else "full"))

    if timing_seconds is not None and timing_seconds <= 0:
        raise BadInput("--timing-seconds must be positive")
    from judge.policy import TimingPolicy

    policy = TimingPolicy(max_seconds_per_case=timing_seconds) if timing_seconds else None

    def progress(row: Any) -> None:
        perf = "; ".join(f"{p.case} {p.median_ms:.4f} ms" + (f" {p.roofline_fraction:.0%} of {p.bound} roofline"
                                                               if p.bound != "n/a" else "") for p in row.perf)
        click.echo(f"  {row.task}: {row.verdict} ({row.seconds:.1f} s){'; ' + perf if perf else ''}"
                   + (f" [{row.failing_case}: {row.message[:200]}]" if not row.passed else ""), err=True)

    from runners.pool import WorkerStartError

    try:
        report = run_check(chosen, target, workers=workers, timing_policy=policy, on_result=progress,
                           task_sources=task_sources)
    except WorkerStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_report(report))
    sys.exit(1 if report.failed else 0)


@cli.command("serve-sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port; 0 picks a free one.")
@click.option("--latency", type=float, default=0.0, show_default=True, help="Seconds added to every chat request.")
@click.option("--fail-rate", type=float, default=0.0, show_default=True,
              help="Probability that a chat request gets a fault (429, 500 or a dropped connection).")
@click.option("--faults", default="429,500,drop", show_default=True,
              help="Fault kinds to draw from: 429, 500, drop, timeout.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fault generator.")
def serve_sim(host: str, port: int, latency: float, fail_rate: float, faults: str, seed: int) -> None:
    """Serve the simulated model as an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models)."""
    from modelio.server import ServerOptions, SimServer

    try:
        options = ServerOptions(latency_s=latency, fail_rate=fail_rate, fault_kinds=tuple(_split(faults) or ()),
                                seed=seed)
        server = SimServer(host, port, options)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    click.echo(f"serving the SIMULATED model at {server.url} (latency {latency} s, fail rate {fail_rate}); "
               f"use: compare --base-url {server.url} --model sim", err=True)
    click.echo(server.url)  # the one stdout line, for scripts that start it with --port 0
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("serve-sim stopped", err=True)
    finally:
        server.httpd.server_close()


def _run_dirs(run_dirs: tuple[Path, ...]) -> list[Path]:
    """Report/figures arguments: every folder must be a run (RunError -> one line, exit 2)."""
    from results.readers import RunError, read_run_info

    if not run_dirs:
        raise BadInput("give at least one run folder")
    try:
        for d in run_dirs:
            read_run_info(d)
    except RunError as exc:
        raise BadInput(str(exc)) from None
    return list(run_dirs)


@cli.command("report")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output folder [default RUN_DIR/report; RUN_DIR/report-combined-N for several runs].")
@click.option("--resamples", type=int, default=10_000, show_default=True, help="Bootstrap resamples.")
def report_command(run_dirs: tuple[Path, ...], fmt: str, out: Path | None, resamples: int) -> None:
    """Tables, figures and a verdict per method pair for one run, or several runs with matching tasks and budgets."""
    from results.readers import RunError
    from results.report import write_report

    paths = _run_dirs(run_dirs)
    try:
        files = write_report(paths, out, fmt, n_resamples=resamples)
    except RunError as exc:
        raise BadInput(str(exc)) from None
    drawn = [f for f in files.figures if not f.skipped]
    click.echo(f"report: {files.report}")
    click.echo(f"tables: {len(files.tables)} files in {files.tables[0].parent}" if files.tables else "tables: none")
    click.echo(f"figures: {len(drawn)} drawn in {drawn[0].files[0].parent}" if drawn else "figures: none drawn")
    for f in files.figures:
        if f.skipped:
            click.echo(f"  {f.name}: not drawn ({f.skipped})")


@cli.command("figures")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output folder [default RUN_DIR/figures].")
@click.option("--resamples", type=int, default=10_000, show_default=True, help="Bootstrap resamples.")
def figures_command(run_dirs: tuple[Path, ...], out: Path | None, resamples: int) -> None:
    """The report's figures alone (PNG and PDF), ready for a paper."""
    from results.readers import RunError
    from results.report import write_figures_only

    paths = _run_dirs(run_dirs)
    try:
        figures = write_figures_only(paths, out, n_resamples=resamples)
    except RunError as exc:
        raise BadInput(str(exc)) from None
    for f in figures:
        click.echo(f"{f.name}: " + (", ".join(str(p) for p in f.files) if not f.skipped else f"not drawn ({f.skipped})"))


def main() -> None:
    from bench.registry import UnknownTaskError
    from methods.registry import UnknownMethodError
    from modelio.replay import ReplayMiss
    from runners.config import ConfigError

    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError):
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        exc.show()
        sys.exit(exc.exit_code)
    except (ConfigError, UnknownTaskError, UnknownMethodError, ReplayMiss) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        click.echo("interrupted; resume with --resume RUN_DIR", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
