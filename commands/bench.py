"""`bench list`, `bench check`, `bench strength`: the task suites, their expert baselines judged
and timed, and the strength of their tests against seeded mutants."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

import click

from commands.common import (
    WORKERS_HELP,
    BadInput,
    device_option,
    given_sources,
    say,
    source_option,
    split_list,
    unsandboxed_option,
)


@click.group()
def bench() -> None:
    """Inspect and check the task suites."""


def _report_sources(reports: list[Any]) -> None:
    for rep in reports:
        c = rep.counts()
        say(f"{rep.adapter} {rep.root}: {c['loaded']} tasks loaded, {c['skipped']} skipped")
        for s in rep.skipped:
            say(f"  skipped {Path(s.path).name}: {s.reason}")
        for note in rep.notes:
            if note.startswith("warning"):
                say(f"  {note}")


@bench.command("list")
@click.option("--suite", default=None, help="Only this suite [default: every task].")
@source_option
@click.option("--json", "as_json", is_flag=True)
def bench_list(suite: str | None, sources: tuple[str, ...], as_json: bool) -> None:
    from bench.listing import list_tasks

    listing = list_tasks(suite, given_sources(sources))
    if as_json:
        click.echo(json.dumps(listing.rows, indent=2))
        if listing.reports:
            say(json.dumps({"sources": [r.to_json() for r in listing.reports]}))
        return
    for r in listing.rows:
        click.echo(f"{r['id']:<20} d{r['difficulty']} {','.join(r['suites']):<18} {','.join(r['dtypes']):<26} "
                   f"visible {r['visible_cases']}, hidden {r['hidden_cases_gpu']} (GPU) / {r['hidden_cases_cpu']} (CPU)")
    _report_sources(listing.reports)


@bench.command("check")
@click.option("--suite", default=None, help="Suite to check [default: quick without a GPU, full with one].")
@click.option("--tasks", default=None, help="Comma-separated task ids (overrides --suite) [default: the suite's].")
@source_option
@click.option("--workers", type=int, default=None, help=WORKERS_HELP)
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
        say(f"  {row.task}: {row.verdict} ({row.seconds:.1f} s){'; ' + perf if perf else ''}"
             + (f" [{row.failing_case}: {row.message[:200]}]" if not row.passed else ""))
        if progress_file is not None:
            progress_file.write(json.dumps(row.to_json()) + "\n")
            progress_file.flush()

    try:
        report = check_suite(suite, split_list(tasks), given_sources(sources), workers=workers, device=device,
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
    report = run_strength(StrengthOptions(suite, tuple(split_list(tasks) or ()), tuple(given_sources(sources) or ()), mutants,
                                          seed, workers, device, stress_factor=stress_factor,
                                          differential_factor=differential_factor),
                          on_outcome=lambda o: say(f"  {o.mutant}: suite {o.suite_verdict}, hidden {o.hidden_verdict}, "
                                                    f"stress {o.stress_verdict} ({o.status})"),
                          on_message=lambda m: say(f"  {m}"))
    folder = out or Path("runs") / f"strength-{report.suite_name.replace(':', '_').replace('/', '_')}-seed{seed}"
    try:
        write_csv(report, folder)
        (folder / "strength.json").write_text(json.dumps(report.to_json(), indent=2))
        figure = draw_figure(report, folder / "strength.png")
    except OSError as exc:
        raise BadInput(f"cannot write the report into {folder}: {exc.strerror or exc}") from None
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_report(report))
    say(f"{len(report.outcomes)} mutants in {report.seconds:.0f} s; csv in {folder}"
         + (f", figure {figure}" if figure else ""))
