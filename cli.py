"""Command line: `python cli.py compare --budget 100` and friends.

Commands parse options, call one library function each and print what it returns; the work
(resuming, replaying, clock locking, judging, checking, reporting, serving) lives in the
library, where tests and users' scripts call it in-process:

    compare      runners.compare.run_compare (and estimate_compare for --dry-run)
    eval         runners.judge_file.judge_file
    bench list   bench.listing.list_tasks
    bench check  runners.check.check_suite
    score        runners.score.score_suite
    report       results.report.write_report
    figures      results.report.write_figures_only
    plan         results.planning.make_plan
    verify       runners.verify.verify_run
    runs list    results.run_list.list_runs
    show         results.unit_view.show_unit
    export       results.export.export_run
    serve-sim    modelio.server.serve

Nothing heavy runs at import (torch and triton are imported inside commands), so `--help` is
instant. Bad input of any kind ends with one line on stderr and exit status 2, never a
traceback; Ctrl-C ends with status 130.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

import click

EXIT_BAD_INPUT = 2
EXIT_ERRORED_UNITS = 3  # the run finished, but some units ended on a failed model call (see the warning line)
EXIT_INTERRUPTED = 130
MIN_RESAMPLES = 100  # fewer give intervals that are noise (and 1 cannot give one at all)


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def _names(value: str | None, option: str) -> list[str] | None:
    """A comma-separated list of names given on the command line; an empty one (`--tasks ""`) is
    bad input, never the default: the user asked for something and would silently get everything."""
    items = _split(value)
    if value is not None and not items:
        raise BadInput(f"{option} is empty: give comma-separated names, or leave {option} out for the default")
    return items


_SOURCE_HELP = ("Load tasks from an external suite, ADAPTER:PATH (geak-eval:DIR or kernelbench:DIR); repeatable; "
                "replaces $KMC_TASK_SOURCES [default: $KMC_TASK_SOURCES, else none]. Skipped files and their reasons "
                "are reported on stderr.")
_DEVICE_HELP = ("auto: GPU if present, else the Triton CPU interpreter; cpu: always the interpreter "
                "[default auto; cpu when $KMC_FORCE_CPU=1].")
_WORKERS_HELP = ("Judging worker processes [default: the usable cores, bounded per GPU by its free memory and by host "
                 "memory; recorded in config.json]; timing has one lane per GPU either way.")


def source_option(command: Any) -> Any:
    """`--source ADAPTER:PATH` (repeatable), shared by every command that takes tasks."""
    return click.option("--source", "sources", multiple=True, metavar="ADAPTER:PATH", help=_SOURCE_HELP)(command)


def device_option(command: Any) -> Any:
    return click.option("--device", type=click.Choice(["auto", "cpu"]), default=None, help=_DEVICE_HELP)(command)


_UNSANDBOXED_HELP = ("Judge candidates even where the candidate sandbox (its own namespaces, no capabilities, an "
                     "allow-listed filesystem) cannot be built here: candidate code then runs with the toolkit's "
                     "privileges. Off by default; refused without it. Recorded and printed on the report.")


def _accept_risk(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        from judge.sandbox import accept_risk

        accept_risk()
    return value


def unsandboxed_option(command: Any) -> Any:
    """`--unsandboxed` on a command that keeps no run config: this process's pools accept the risk."""
    return click.option("--unsandboxed", is_flag=True, expose_value=False, callback=_accept_risk,
                        help=_UNSANDBOXED_HELP)(command)


def _sources(sources: tuple[str, ...]) -> list[str] | None:
    """The --source values, or None when none was given (then the default applies)."""
    return list(sources) if sources else None


def _say(message: str) -> None:
    click.echo(message, err=True)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from results.provenance import this_version

    click.echo(this_version())
    ctx.exit()


def _verbose(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--verbose: every record of the toolkit on stderr (through tqdm, so a progress bar stays whole)."""
    if value:
        from runners.logs import attach

        attach(_TqdmHandler())


def _log_file(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        from runners.logs import attach

        try:
            attach(logging.FileHandler(value, encoding="utf-8"))
        except OSError as exc:
            raise BadInput(f"cannot write the log file {value}: {exc.strerror or exc}") from None


class _TqdmHandler(logging.Handler):
    """Writes records through tqdm.write, so they appear above a live progress bar, not through it."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


def _logging_options(command: click.Command) -> None:
    """--verbose and --log-file on a command and every subcommand (a run folder always keeps run.log)."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _logging_options(sub)
        return
    command.params.append(click.Option(["--verbose", "-v"], is_flag=True, expose_value=False, callback=_verbose,
                                       help="Log every step (model calls, evaluations, units) on stderr."))
    command.params.append(click.Option(["--log-file"], type=click.Path(path_type=Path, dir_okay=False),
                                       expose_value=False, callback=_log_file,
                                       help="Also append the log to this file (runs always keep RUN_DIR/run.log) "
                                            "[default: none]."))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the toolkit's version (and git commit) and exit.")
def cli() -> None:
    """Compare LLM kernel-writing methods at equal compute, on hidden tests, with error bars."""


# ---------------------------------------------------------------------------- compare
@cli.command()
@click.option("--budget", type=int, default=None, help="LLM budget per (method, task, repeat) [default 100].")
@click.option("--budget-unit", type=click.Choice(["calls", "tokens", "output_tokens", "total_tokens"]), default=None,
              help="What the budget counts [default calls]; tokens = total_tokens.")
@click.option("--methods", default=None,
              help="Comma-separated methods [default direct,reflexion,geak]; empty is an error.")
@click.option("--tasks", default=None,
              help="Comma-separated task ids (overrides --suite) [default: the suite's tasks]; empty is an error.")
@click.option("--suite", default=None, help="Task suite [default: quick without a GPU, full with one].")
@source_option
@click.option("--repeats", type=int, default=None, help="Independent repeats per (method, task) [default 1].")
@click.option("--seed", type=int, default=None, help="Run seed [default 0].")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="YAML or JSON file of options; command-line flags override it [default: none].")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Folder for run folders [default runs/].")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Finish an interrupted run folder with its recorded options (a finished one is reported "
                   "complete) [default: none: a new run].")
@click.option("--base-url", default=None,
              help="OpenAI-compatible endpoint [default: none: the built-in simulated model].")
@click.option("--model", default=None, help="Model name at the endpoint (required with --base-url) [default: none].")
@click.option("--api-key-env", default=None,
              help="Environment variable holding the API key [default OPENAI_API_KEY].")
@device_option
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@click.option("--worker-user", default=None, metavar="USER",
              help="Run evaluation workers as this unprivileged user, e.g. nobody (needs root). Off by default.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Judge on Ray actors (extra `cluster`): `local` starts Ray here, `auto` joins a running cluster, "
                   "or a cluster's address. Judging actors plus one timing actor per GPU [default: none: the "
                   "local worker pool].")
@click.option("--quiet", is_flag=True,
              help="No progress (a live bar on a terminal, else one line per finished unit). Off by default.")
@click.option("--max-concurrency", type=int, default=None, help="Model requests in flight at once [default 8].")
@click.option("--dry-run", is_flag=True, help="Print the calls, tokens and estimated cost the run would spend; spend nothing.")
@click.option("--replay", type=click.Path(path_type=Path), default=None,
              help="Re-run a recorded run folder from its recorded model responses and evaluations: every decision "
                   "and summary.json reproduced exactly, with no network and no GPU [default: none].")
@click.option("--rejudge", is_flag=True,
              help="With --replay: judge every candidate anew on this machine instead of replaying the evaluations.")
@click.option("--lock-clocks", "lock_spec", default=None, metavar="auto|SM[,MEM]",
              help="Lock GPU clocks for the run (needs root; restored on exit and Ctrl-C). Off by default.")
@click.option("--eval-budget", type=int, default=None, metavar="N",
              help="GPU evaluations per unit (visible feedback and a method's own test runs), enforced like calls "
                   "[default: one per two calls of a calls budget, the same for every method; none for a token "
                   "budget].")
@click.option("--oneshot-corpus", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="One-shot example corpus (GEAK-v1 train_crawl.json layout) [default: the built-in expert kernels].")
@click.option("--retry-errors", is_flag=True,
              help="With --resume: run errored units again (their good calls replayed, their failed calls resent).")
@click.option("--unsandboxed", is_flag=True, help=_UNSANDBOXED_HELP)
def compare(budget: int | None, budget_unit: str | None, methods: str | None, tasks: str | None, suite: str | None,
            sources: tuple[str, ...], repeats: int | None, seed: int | None, config_path: Path | None,
            out: Path | None, resume: Path | None, base_url: str | None, model: str | None, api_key_env: str | None,
            device: str | None, workers: int | None, worker_user: str | None, ray_address: str | None, quiet: bool,
            max_concurrency: int | None, dry_run: bool, replay: Path | None, lock_spec: str | None,
            eval_budget: int | None, oneshot_corpus: Path | None, retry_errors: bool, rejudge: bool,
            unsandboxed: bool) -> None:
    """Run every method on every task under one budget ledger, then judge on hidden tests.

    Exit status: 0 when every unit finished cleanly; 3 when the run finished but some units
    ended on a model call that failed for good (a warning line names them; finish them with
    --resume RUN_DIR --retry-errors); 2 for bad input; 130 when interrupted."""
    from runners.compare import (
        CompareInterrupted,
        CompareOptions,
        estimate_compare,
        recorded_options,
        resume_command,
        run_compare,
    )
    from runners.config import compose_config

    flags = {"budget": budget, "budget_unit": budget_unit, "methods": _names(methods, "--methods"),
             "tasks": _names(tasks, "--tasks"),
             "suite": suite, "repeats": repeats, "seed": seed, "device": device, "workers": workers,
             "worker_user": worker_user, "ray_address": ray_address, "task_sources": _sources(sources),
             "eval_budget": eval_budget, "unsandboxed": True if unsandboxed else None,
             "oneshot_corpus": str(oneshot_corpus) if oneshot_corpus else None}
    endpoint = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "max_concurrency": max_concurrency}
    config = compose_config({**flags, **endpoint}, config_path, recorded_options(replay) if replay else None)
    # Which options go together is settled by the library (runners/plan.py plan_run), once.
    options = CompareOptions(out=out, resume=resume, replay=replay, lock_clocks=_parse_lock_spec(lock_spec),
                             command_line=list(sys.argv), on_message=_say, retry_errors=retry_errors,
                             resume_with={"workers": workers} if resume is not None and workers is not None else {},
                             rejudge=rejudge)
    if dry_run:
        click.echo(estimate_compare(config, options).format())
        return
    if resume is not None and (config_path or any(v is not None for k, v in flags.items() if k != "workers")):
        _say("note: --resume uses the run's recorded config (it may change only --workers); other run options "
             "are ignored")
    from runners.progress_display import ProgressDisplay

    # A live bar on a terminal; with stderr redirected, one line per finished unit.
    display = ProgressDisplay(sys.stderr, live=False if quiet else None)
    if not quiet:
        options.on_start, options.on_progress = display.start, display.update
    try:
        result = run_compare(config, options)
    except CompareInterrupted as stop:
        display.close()
        _say(f"\ninterrupted: {stop.units_done} of {stop.units_total} units finished and recorded; "
             f"finish with: {resume_command(stop.run_dir)}")
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        display.close()
    from results.summary import format_table

    click.echo(format_table(result.summary, result.target.interpreter))
    s = result.endpoint_stats
    if s is not None:
        cost = "unknown (no price for this model)" if s.cost_usd is None else f"${s.cost_usd:.4f}"
        click.echo(f"endpoint: {s.calls} calls, {s.failed_calls} failed, {s.retries} retries; "
                   f"{s.prompt_tokens} prompt + {s.completion_tokens} completion tokens; estimated cost {cost}")
    click.echo(f"wall time {result.wall_s:.1f} s; summary: {result.summary_path}")
    if result.errored_units:
        errored = result.errored_units
        names = ", ".join(f"{m}/{t}/{r}" for m, t, r in errored[:5]) + (" ..." if len(errored) > 5 else "")
        _say(f"warning: {len(errored)} unit(s) ended on an error, a failed model call or the method raising "
             f"({names}); the report lists their "
             f"errors; retry them with: {resume_command(result.run_dir, '--retry-errors')}")
        raise SystemExit(EXIT_ERRORED_UNITS)


def _parse_lock_spec(spec: str | None) -> tuple[int | None, int | None] | None:
    if spec is None:
        return None
    from runners.clock_lock import parse_lock_spec

    try:
        return parse_lock_spec(spec)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


# ---------------------------------------------------------------------------- eval
@cli.command("eval")
@click.option("--task", "task_id", required=True, help="Task id.")
@click.option("--candidate", type=click.Path(path_type=Path, exists=True, dir_okay=False), required=True,
              help="Python file holding the candidate kernel and its entry point.")
@click.option("--hidden/--visible", default=True, help="Judge on hidden cases or visible ones [default: hidden].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds before the candidate is a timeout [default: 180 on a GPU, 600 on the CPU].")
@click.option("--worker-user", default=None, metavar="USER",
              help="Run the evaluation worker as this unprivileged user, e.g. nobody (needs root). Off by default.")
@source_option
@device_option
@unsandboxed_option
def eval_command(task_id: str, candidate: Path, hidden: bool, as_json: bool, timeout: float | None,
                 worker_user: str | None, sources: tuple[str, ...], device: str | None) -> None:
    """Judge one candidate file on a task."""
    from runners.judge_file import judge_file

    result = judge_file(task_id, candidate, "hidden" if hidden else "visible", timeout=timeout,
                        worker_user=worker_user, device=device, sources=_sources(sources))
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(result.evaluation.verdict.one_line())
        if result.evaluation.verdict.traceback:
            click.echo(result.evaluation.verdict.traceback)
        t = result.evaluation.timing
        if t:
            ci = f"{t.speedup_ci[0]:.3f}-{t.speedup_ci[1]:.3f}" if t.speedup_ci else "n/a"
            click.echo(f"speedup vs expert baseline {t.speedup_vs_baseline:.3f}x "
                       f"(95% CI {ci}); vs eager {t.speedup_vs_eager or float('nan'):.3f}x"
                       + (f"; flagged: {', '.join(t.flag_reasons)}" if t.flagged else ""))
        elif result.target.interpreter:
            click.echo("timing: unavailable on the CPU interpreter")
    sys.exit(0 if result.correct else 1)


# ---------------------------------------------------------------------------- bench
@cli.group()
def bench() -> None:
    """Inspect and check the task suites."""


def _report_sources(reports: list[Any]) -> None:
    for rep in reports:
        c = rep.counts()
        _say(f"{rep.adapter} {rep.root}: {c['loaded']} tasks loaded, {c['skipped']} skipped")
        for s in rep.skipped:
            _say(f"  skipped {Path(s.path).name}: {s.reason}")
        for note in rep.notes:
            if note.startswith("warning"):
                _say(f"  {note}")


@bench.command("list")
@click.option("--suite", default=None, help="Only this suite [default: every task].")
@source_option
@click.option("--json", "as_json", is_flag=True)
def bench_list(suite: str | None, sources: tuple[str, ...], as_json: bool) -> None:
    from bench.listing import list_tasks

    listing = list_tasks(suite, _sources(sources))
    if as_json:
        click.echo(json.dumps(listing.rows, indent=2))
        if listing.reports:
            _say(json.dumps({"sources": [r.to_json() for r in listing.reports]}))
        return
    for r in listing.rows:
        click.echo(f"{r['id']:<20} d{r['difficulty']} {','.join(r['suites']):<18} {','.join(r['dtypes']):<26} "
                   f"visible {r['visible_cases']}, hidden {r['hidden_cases_gpu']} (GPU) / {r['hidden_cases_cpu']} (CPU)")
    _report_sources(listing.reports)


@bench.command("check")
@click.option("--suite", default=None, help="Suite to check [default: quick without a GPU, full with one].")
@click.option("--tasks", default=None, help="Comma-separated task ids (overrides --suite) [default: the suite's].")
@source_option
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@device_option
@unsandboxed_option
@click.option("--timing-seconds", type=float, default=None,
              help="Cap on sampling time per perf case and timed function [default: the timing policy's 3 s].")
@click.option("--no-timing", is_flag=True, help="Judge only; do not time the baselines on a GPU.")
@click.option("--shard", default=None, metavar="K/N",
              help="Only the K-th of N slices of the tasks (by sorted id), to split a long check into runs "
                   "[default: every task].")
@click.option("--timeout", "job_timeout", type=float, default=None,
              help="Seconds per baseline before it is a timeout [default: 180 on a GPU, 600 on the CPU].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--jsonl", "progress_file", type=click.File("a", lazy=False), default=None, metavar="FILE",
              help="Append each task's result to FILE as one JSON line as soon as it is judged (a run cut off "
                   "by a time limit keeps what it judged) [default: none].")
@click.option("--skip-judged", is_flag=True,
              help="With --jsonl FILE: leave out the tasks FILE already has a line for (go on with a check "
                   "that was cut off; scripts/check_summary.py merges the file).")
def bench_check(suite: str | None, tasks: str | None, sources: tuple[str, ...], workers: int | None,
                device: str | None, timing_seconds: float | None, no_timing: bool, shard: str | None,
                job_timeout: float | None, as_json: bool, progress_file: TextIO | None, skip_judged: bool) -> None:
    """Judge every expert baseline of a suite on its hidden cases; on a GPU also time it on its
    perf cases and report the fraction of the memory or compute roofline. Exit 1 if any fails."""
    from bench.check import format_report
    from runners.check import check_suite, judged_in
    from runners.pool import WorkerStartError

    if skip_judged and progress_file is None:
        raise click.UsageError("--skip-judged needs --jsonl FILE (the tasks judged already are read from it)")
    skip = judged_in(Path(progress_file.name)) if skip_judged and progress_file is not None else set()

    def progress(row: Any) -> None:
        perf = "; ".join(f"{p.case} {p.median_ms:.4f} ms" + (f" {p.roofline_fraction:.0%} of {p.bound} roofline"
                                                               if p.bound != "n/a" else "") for p in row.perf)
        _say(f"  {row.task}: {row.verdict} ({row.seconds:.1f} s){'; ' + perf if perf else ''}"
             + (f" [{row.failing_case}: {row.message[:200]}]" if not row.passed else ""))
        if progress_file is not None:
            progress_file.write(json.dumps(row.to_json()) + "\n")
            progress_file.flush()

    try:
        report = check_suite(suite, _split(tasks), _sources(sources), workers=workers, device=device,
                             timing_seconds=timing_seconds, on_result=progress, timing=not no_timing, shard=shard,
                             job_timeout=job_timeout, skip=skip)
    except WorkerStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_report(report))
    sys.exit(1 if report.failed else 0)


@bench.command("strength")
@click.option("--suite", default=None, help="Suite whose expert kernels are mutated [default: full, or the --source's tasks].")
@click.option("--tasks", default=None, help="Comma-separated task ids (overrides --suite) [default: the suite's].")
@source_option
@click.option("--mutants", type=click.IntRange(min=1), default=10, show_default=True, help="Mutants per task.")
@click.option("--seed", type=int, default=0, show_default=True, help="Chooses the mutants and draws the stress cases.")
@click.option("--workers", type=int, default=None, help="Judging worker processes [default: 2 or the cores, if fewer].")
@click.option("--stress-factor", type=click.IntRange(min=1), default=3, show_default=True,
              help="Stress cases (the ground truth) drawn per hidden case.")
@click.option("--differential-factor", type=click.IntRange(min=0), default=5, show_default=True,
              help="Differential cases per hidden case, for mutants no judge kills.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Folder for scores.csv, mutants.csv, strength.json and strength.png [default: runs/strength-<suite>-seed<S>].")
@device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_strength(suite: str | None, tasks: str | None, sources: tuple[str, ...], mutants: int, seed: int,
                   workers: int | None, stress_factor: int, differential_factor: int, out: Path | None,
                   device: str | None, as_json: bool) -> None:
    """Test strength: seeded mutants of each expert kernel judged by the suite's own tests, the
    hidden cases and a larger stress set; mutation scores per task and suite (bench/strength)."""
    from bench.strength.report import draw_figure, format_report, write_csv
    from runners.strength import StrengthOptions, run_strength

    if out is not None:  # an unwritable folder said before the run, not after it
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"--out {out}: {exc.strerror or exc}") from None
    report = run_strength(StrengthOptions(suite, tuple(_split(tasks) or ()), tuple(_sources(sources) or ()), mutants,
                                          seed, workers, device, stress_factor=stress_factor,
                                          differential_factor=differential_factor),
                          on_outcome=lambda o: _say(f"  {o.mutant}: suite {o.suite_verdict}, hidden {o.hidden_verdict}, "
                                                    f"stress {o.stress_verdict} ({o.status})"),
                          on_message=lambda m: _say(f"  {m}"))
    folder = out or Path("runs") / f"strength-{report.suite_name.replace(':', '_').replace('/', '_')}-seed{seed}"
    try:
        write_csv(report, folder)
        (folder / "strength.json").write_text(json.dumps(report.to_json(), indent=2))
        figure = draw_figure(report, folder / "strength.png")
    except OSError as exc:
        raise BadInput(f"cannot write the report into {folder}: {exc.strerror or exc}") from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_report(report))
    _say(f"{len(report.outcomes)} mutants in {report.seconds:.0f} s; csv in {folder}"
         + (f", figure {figure}" if figure else ""))


# ---------------------------------------------------------------------------- score
@cli.command("score")
@click.argument("output_dir", type=click.Path(path_type=Path))
@click.option("--suite", required=True, help="Suite the answers are for (tritonbench, rocm, geak-eval, ...).")
@source_option
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@device_option
@unsandboxed_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (every answer's verdicts).")
def score_command(output_dir: Path, suite: str, sources: tuple[str, ...], workers: int | None, device: str | None,
                  as_json: bool) -> None:
    """Re-score a folder of generated files in GEAK-eval's layout (<task file>.py, or JSON answer
    lists, one per pass): GEAK-eval's call and execution accuracy beside the strict hidden pass."""
    from runners.pool import WorkerStartError
    from runners.score import ScoreError, format_score, score_suite

    def progress(row: Any) -> None:
        _say(f"  {row.file} (pass {row.pass_index}): call {'yes' if row.call else 'no'}, exec {row.exec_verdict}, "
             f"strict {row.strict_verdict}")

    try:
        report = score_suite(output_dir, suite, _sources(sources), workers=workers, device=device, on_row=progress)
    except ScoreError as exc:
        raise BadInput(str(exc)) from None
    except WorkerStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_score(report))


# ---------------------------------------------------------------------------- serve-sim
@cli.command("serve-sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port; 0 picks a free one.")
@click.option("--latency", type=float, default=0.0, show_default=True, help="Seconds added to every chat request.")
@click.option("--fail-rate", type=float, default=0.0, show_default=True,
              help="Probability that a chat request gets a fault (429, 500 or a dropped connection).")
@click.option("--faults", default="429,500,drop", show_default=True,
              help="Fault kinds to draw from: 429, 500, drop, timeout.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fault generator.")
@click.option("--reject-json-mode", is_flag=True, help="Answer HTTP 400 to every request asking for JSON mode.")
@click.option("--reject-every", type=int, default=0, show_default=True, metavar="N",
              help="Answer HTTP 400 (context length exceeded) to every N-th chat request; 0: never.")
@click.option("--reject-max-tokens", is_flag=True,
              help="Answer HTTP 400 to a reply cap sent as max_tokens (wanting max_completion_tokens, as OpenAI's "
                   "reasoning models do).")
def serve_sim(host: str, port: int, latency: float, fail_rate: float, faults: str, seed: int,
              reject_json_mode: bool = False, reject_every: int = 0, reject_max_tokens: bool = False) -> None:
    """Serve the simulated model as an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models)."""
    from modelio.server import ServerOptions, serve

    def ready(server: Any) -> None:
        _say(f"serving the SIMULATED model at {server.url} (latency {latency} s, fail rate {fail_rate}); "
             f"use: compare --base-url {server.url} --model sim")
        click.echo(server.url)  # the one stdout line, for scripts that start it with --port 0
        sys.stdout.flush()

    try:
        options = ServerOptions(latency_s=latency, fail_rate=fail_rate, fault_kinds=tuple(_split(faults) or ()),
                                seed=seed, reject_json_mode=reject_json_mode, reject_every=reject_every,
                                reject_max_tokens=reject_max_tokens)
        serve(host, port, options, on_ready=ready)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except KeyboardInterrupt:
        _say("serve-sim stopped")


# ---------------------------------------------------------------------------- report, figures
_SAME_SEED_HELP = ("Combine runs whose units share seeds (copies, refused by default), counting each copy once.")


@cli.command("report")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output folder [default: RUN_DIR-report beside the run folder, which is never written; "
                   "RUN_DIR-report-combined-N for several runs].")
@click.option("--resamples", type=click.IntRange(min=MIN_RESAMPLES), default=10_000, show_default=True,
              help=f"Bootstrap resamples (at least {MIN_RESAMPLES}).")
@click.option("--allow-same-seed", is_flag=True, help=_SAME_SEED_HELP)
def report_command(run_dirs: tuple[Path, ...], fmt: str, out: Path | None, resamples: int,
                   allow_same_seed: bool) -> None:
    """Tables, figures and a verdict per method pair for one run, or several runs with matching tasks and budgets."""
    from results.report import write_report

    if not run_dirs:
        raise BadInput("give at least one run folder")
    files = write_report(list(run_dirs), out, fmt, n_resamples=resamples, allow_same_seed=allow_same_seed)
    if files.banner:
        _say(files.banner)
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
              help="Output folder [default: RUN_DIR-figures beside the run folder, which is never written; "
                   "RUN_DIR-figures-combined-N for several runs].")
@click.option("--resamples", type=click.IntRange(min=MIN_RESAMPLES), default=10_000, show_default=True,
              help=f"Bootstrap resamples (at least {MIN_RESAMPLES}).")
@click.option("--style", "style_name", type=click.Choice(["default", "paper"]), default="default", show_default=True,
              help="paper: 3.25/6.75 in column widths, 8 pt text, no titles; default: screen sizes with titles.")
@click.option("--format", "formats", default="png,pdf", show_default=True, metavar="png,pdf,svg",
              help="Comma-separated file formats (PNG at 300 dpi; PDF and SVG with TrueType text).")
@click.option("--titles/--no-titles", default=None,
              help="Draw titles on the figures [default: on for the default style, off for paper].")
@click.option("--allow-same-seed", is_flag=True, help=_SAME_SEED_HELP)
def figures_command(run_dirs: tuple[Path, ...], out: Path | None, resamples: int, style_name: str, formats: str,
                    titles: bool | None, allow_same_seed: bool) -> None:
    """The report's figures alone, camera-ready: each in the chosen formats with a CSV of the
    plotted numbers beside it; a simulated (or unfinished) run is watermarked inside the axes."""
    from results.figure_style import FigureStyle
    from results.report import write_figures_only

    if not run_dirs:
        raise BadInput("give at least one run folder")
    try:
        style = FigureStyle.make(style_name, _split(formats) or [], titles)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    files = write_figures_only(list(run_dirs), out, n_resamples=resamples, style=style,
                               allow_same_seed=allow_same_seed)
    if files.banner:
        _say(files.banner)
    for f in files.figures:
        click.echo(f"{f.name}: " + (", ".join(str(p) for p in f.files) if not f.skipped else f"not drawn ({f.skipped})"))


# ---------------------------------------------------------------------------- plan
@cli.command("plan")
@click.option("--tasks", "n_tasks", type=int, required=True, help="Number of tasks the run will have.")
@click.option("--repeats", type=int, default=1, show_default=True, help="Repeats per (method, task).")
@click.option("--baseline", type=float, default=None,
              help="Expected pass rate of the methods (0-1) [default with --pilot: the pilot's].")
@click.option("--pilot", type=click.Path(path_type=Path), default=None,
              help="A run folder (with repeats) to estimate the variances from, instead of assuming them "
                   "[default: none: ICC 0.5, method correlation 0.8].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def plan_command(n_tasks: int, repeats: int, baseline: float | None, pilot: Path | None, as_json: bool) -> None:
    """Minimum detectable difference in pass rate and power of a comparison run (paired t-test over tasks)."""
    from results.planning import make_plan

    plan = make_plan(n_tasks, repeats, baseline, pilot)
    click.echo(json.dumps(plan.to_json(), indent=2) if as_json else plan.text())


# ---------------------------------------------------------------------------- runs, show, export
@cli.group("runs")
def runs_group() -> None:
    """Find and inspect run folders."""


@runs_group.command("list")
@click.argument("folder", type=click.Path(path_type=Path), default=Path("runs"))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
def runs_list(folder: Path, as_json: bool) -> None:
    """One line per run folder under FOLDER [runs/]: id, start, model, budget, methods, tasks,
    repeats, status (complete, or partial with units done/planned) and wall time."""
    from results.run_list import format_rows, list_runs

    rows = list_runs(folder)
    click.echo(json.dumps([r.to_json() for r in rows], indent=2) if as_json else format_rows(rows))


@cli.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--method", required=True, help="Method name.")
@click.option("--task", required=True, help="Task id.")
@click.option("--repeat", type=click.IntRange(min=0), default=0, show_default=True, help="Repeat index.")
@click.option("--all", "all_candidates", is_flag=True, help="Print every candidate's code, not only the submitted one.")
@click.option("--calls", "include_calls", is_flag=True, help="Print every prompt and reply.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show_command(run_dir: Path, method: str, task: str, repeat: int, all_candidates: bool, include_calls: bool,
                 as_json: bool) -> None:
    """What one method did on one task: the submitted kernel and its verdicts, and the trail of
    model calls, candidates, feedback and submissions that led to it."""
    from results.unit_view import show_unit

    view = show_unit(run_dir, method, task, repeat, all_candidates, include_calls)
    click.echo(json.dumps(view.to_json(), indent=2) if as_json else view.format())


@cli.command("export")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "jsonl"]), default="csv", show_default=True)
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Output folder [default: RUN_DIR-export, beside the run folder, which is never written].")
@click.option("--sources", "with_sources", is_flag=True, help="Add each candidate's code as a column.")
def export_command(run_dir: Path, fmt: str, out: Path | None, with_sources: bool) -> None:
    """Per-unit results (one row per method, task and repeat) and every candidate as plain files,
    with export.json beside them (simulated label, progress, what each column means)."""
    from results.export import export_run

    files = export_run(run_dir, fmt, out, with_sources)
    if files.banner:
        _say(files.banner)
    click.echo(f"units: {files.units} ({files.rows} rows)")
    click.echo(f"candidates: {files.candidates} ({files.candidate_rows} rows)")
    click.echo(f"about them: {files.sidecar}")


# ---------------------------------------------------------------------------- verify
@cli.command("verify")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--candidates", is_flag=True, help="Re-judge every candidate too, not only the submissions.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@source_option
@device_option
@unsandboxed_option
@click.option("--workers", type=click.IntRange(min=1), default=None, help=_WORKERS_HELP)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds per evaluation before it is a timeout [default: 180 on a GPU, 600 on the CPU].")
@click.option("--speedup-tolerance", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="Re-measured speedups agree when the interval of their ratio to the recorded ones reaches "
                   "within this fraction of 1.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def verify_command(run_dir: Path, candidates: bool, as_json: bool, sources: tuple[str, ...], device: str | None,
                   workers: int | None, timeout: float | None, speedup_tolerance: float, quiet: bool) -> None:
    """Re-judge a recorded run's submissions on the hidden cases (and on a GPU re-time its final
    submissions) and say whether the recorded verdicts and speedups hold. Exit 0 when everything
    that could be checked here agrees, 1 otherwise. The run folder is only read."""
    from runners.pool import WorkerStartError
    from runners.verify import VerifyOptions, verify_run

    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if quiet:
            return
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="eval", desc="re-judging", dynamic_ncols=True, file=sys.stderr)
        bar.n = done
        bar.refresh()

    options = VerifyOptions(candidates=candidates, workers=workers, device=device, sources=_sources(sources),
                            timeout=timeout, speedup_tolerance=speedup_tolerance, on_progress=progress)
    try:
        report = verify_run(run_dir, options)
    except WorkerStartError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else report.format())
    sys.exit(0 if report.ok else 1)


_logging_options(cli)


# ---------------------------------------------------------------------------- entry point
# Errors that mean bad input (one line, exit 2), by module: looked up only among modules already
# imported, since an error class from a module nobody imported cannot have been raised (and
# importing them all up front would pull pandas and torch into `--help`).
_BAD_INPUT_ERRORS = (("bench.registry", "UnknownTaskError"), ("methods.registry", "UnknownMethodError"),
                     ("modelio.replay", "ReplayMiss"), ("results.run_folder", "RunFolderError"),
                     ("results.planning", "PlanError"), ("runners.config", "ConfigError"),
                     ("judge.sandbox", "SandboxRefused"))


def _bad_input_types() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[module], name) for module, name in _BAD_INPUT_ERRORS if module in sys.modules)


def main() -> None:
    """Run the CLI, turning the library's bad-input errors into one line and exit status 2."""
    logging.getLogger("kmc").addHandler(logging.NullHandler())  # records go to run.log and --verbose only
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        _say("aborted")
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError):
            _say(f"error: {exc.format_message()}")
            sys.exit(EXIT_BAD_INPUT)
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _say("interrupted; resume with --resume RUN_DIR")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        if not isinstance(exc, _bad_input_types()):
            raise
        _say(f"error: {exc}")
        sys.exit(EXIT_BAD_INPUT)

if __name__ == "__main__":
    main()
