"""`eval`, `score` and `verify`: judge candidate code outside a comparison run (one file, a folder
of generated files in GEAK-eval's layout, a recorded run's verdicts again on this machine)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from commands.common import (
    WORKERS_HELP,
    BadInput,
    device_option,
    given_sources,
    say,
    source_option,
    unsandboxed_option,
)


@click.command("eval")
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
                        worker_user=worker_user, device=device, sources=given_sources(sources))
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


@click.command("score")
@click.argument("output_dir", type=click.Path(path_type=Path))
@click.option("--suite", required=True, help="Suite the answers are for (tritonbench, rocm, geak-eval, ...).")
@source_option
@click.option("--workers", type=int, default=None, help=WORKERS_HELP)
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
        say(f"  {row.file} (pass {row.pass_index}): call {'yes' if row.call else 'no'}, exec {row.exec_verdict}, "
             f"strict {row.strict_verdict}")

    try:
        report = score_suite(output_dir, suite, given_sources(sources), workers=workers, device=device, on_row=progress)
    except ScoreError as exc:
        raise BadInput(str(exc)) from None
    except WorkerStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_score(report))


@click.command("verify")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--candidates", is_flag=True, help="Re-judge every candidate too, not only the submissions.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@source_option
@device_option
@unsandboxed_option
@click.option("--workers", type=click.IntRange(min=1), default=None, help=WORKERS_HELP)
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

    options = VerifyOptions(candidates=candidates, workers=workers, device=device, sources=given_sources(sources),
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
