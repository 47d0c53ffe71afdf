"""`runs list`, `show` and `export`: find run folders, read one unit's trail, write a run's
rows as plain files."""

from __future__ import annotations

import json
from pathlib import Path

import click

from commands.common import say


@click.group("runs")
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


@click.command("show")
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


@click.command("export")
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
        say(files.banner)
    click.echo(f"units: {files.units} ({files.rows} rows)")
    click.echo(f"candidates: {files.candidates} ({files.candidate_rows} rows)")
    click.echo(f"about them: {files.sidecar}")
