"""`report`, `figures` and `plan`: what a recorded run (or several) shows, and what a planned
run could detect."""

from __future__ import annotations

import json
from pathlib import Path

import click

from commands.common import MIN_RESAMPLES, BadInput, say, split_list

_SAME_SEED_HELP = ("Combine runs whose units share seeds (copies, refused by default), counting each copy once.")


@click.command("report")
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
        say(files.banner)
    drawn = [f for f in files.figures if not f.skipped]
    click.echo(f"report: {files.report}")
    click.echo(f"tables: {len(files.tables)} files in {files.tables[0].parent}" if files.tables else "tables: none")
    click.echo(f"figures: {len(drawn)} drawn in {drawn[0].files[0].parent}" if drawn else "figures: none drawn")
    for f in files.figures:
        if f.skipped:
            click.echo(f"  {f.name}: not drawn ({f.skipped})")


@click.command("figures")
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
        style = FigureStyle.make(style_name, split_list(formats) or [], titles)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    files = write_figures_only(list(run_dirs), out, n_resamples=resamples, style=style,
                               allow_same_seed=allow_same_seed)
    if files.banner:
        say(files.banner)
    for f in files.figures:
        click.echo(f"{f.name}: " + (", ".join(str(p) for p in f.files) if not f.skipped else f"not drawn ({f.skipped})"))


@click.command("plan")
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
