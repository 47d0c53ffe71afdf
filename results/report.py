"""The report: verdicts, tables and figures of one run (or several combined) in one file.

`write_report(paths, out_dir, fmt)` reads the runs (results.readers), analyses them once
(results.analysis), writes the tables (tables/*.md|tex|csv), the figures
(figures/*.png|pdf) and report.md or report.html. The report is assembled as a list of
blocks (heading, paragraph, list, table, figure) rendered to either format, so Markdown
and HTML say the same thing. A simulated run is labelled at the top and in every file.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from record.progress import RunProgress, runs_progress
from record.run_folder import RunFolder, ensure_writable, output_folder
from results.analysis import Analysis, analyse
from results.figure_style import FigureStyle
from results.figures import FigureResult, write_figures
from results.labels import SIMULATED_BANNER
from results.readers import RunData, RunError, load_runs
from results.tables import Table, build_tables, to_markdown, write_tables
from results.verdicts import display, verdict_sentence

FORMATS = ("md", "html")


@dataclass(frozen=True)
class Block:
    kind: str  # "h1" | "h2" | "p" | "list" | "table" | "figure" | "banner"
    content: Any


@dataclass
class ReportFiles:
    report: Path
    tables: list[Path]
    figures: list[FigureResult]
    banner: str | None = None  # the partial-run banner (record/progress.py), None for a finished run


def _run_lines(data: RunData, progress: RunProgress | None = None) -> list[str]:
    unit = "calls" if data.budget_unit == "calls" else f"tokens ({data.budget_unit})"
    partial = progress is not None and not progress.complete
    reported = set(data.units["task"])
    tasks = (f"tasks ({len(data.tasks)} planned, {len(reported)} with finished units): "
             + ", ".join(t if t in reported else f"{t} (none finished)" for t in data.tasks)) if partial \
        else f"tasks ({len(data.tasks)}): {', '.join(data.tasks)}"
    methods = ", ".join(display(m) + (f" ({progress.done.get(m, 0)}/{progress.planned.get(m, 0)} units"
                                      + (": none finished, absent from every table)" if not progress.done.get(m) else ")")
                                      if partial and progress is not None else "") for m in data.methods)
    lines = [f"runs: {', '.join(str(i.path) for i in data.infos)}",
             f"model: {data.first.model}" + (" (built-in simulated model)" if data.simulated else ""),
             f"device: {data.first.device_name}" + (" (no timings)" if data.first.interpreter else ""),
             *([f"UNSANDBOXED: candidates ran without the sandbox (--unsandboxed) in "
                f"{', '.join(i.name for i in data.infos if i.unsandboxed)}: their code had the toolkit's "
                "privileges, so a verdict could have been tampered with"] if any(i.unsandboxed for i in data.infos)
               else []),
             f"budget: {data.budget} {unit} per (method, task, repeat)",
             tasks,
             f"methods: {methods}",
             f"finished units: {len(data.units)}"
             + (f" of {progress.units_planned} planned" if partial and progress is not None else "")
             + f"; repeats per (method, task): {_span(data)}"]
    for m in data.methods:
        opts = data.method_options.get(m, {})
        lines.append(f"{display(m)} options: " + ", ".join(f"{k}={v}" for k, v in sorted(opts.items())))
    return lines


def _span(data: RunData) -> str:
    sizes = data.units.groupby(["method", "task"]).size()
    lo, hi = int(sizes.min()), int(sizes.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def build_blocks(a: Analysis, tables: list[Table], figures: list[FigureResult], fig_dir: str,
                 progress: RunProgress | None = None) -> list[Block]:
    d = a.data
    blocks = [Block("h1", "Kernel-method comparison report" + (" (SIMULATED MODEL)" if d.simulated else ""))]
    if d.simulated:
        blocks.append(Block("banner", SIMULATED_BANNER))
    banner = progress.banner() if progress is not None else None
    if banner:
        blocks.append(Block("banner", banner))
    blocks.append(Block("list", _run_lines(d, progress)))
    blocks.append(Block("h2", "Verdicts"))
    if a.comparisons:
        blocks.append(Block("list", [verdict_sentence(c) for c in a.comparisons]))
    else:
        blocks.append(Block("p", "Only one method: nothing to compare."))
    blocks += failure_blocks(a) + example_blocks(a)
    blocks.append(Block("h2", "Tables"))
    for t in tables:
        if t.in_report:
            blocks.append(Block("table", t))
    files_only = [t.name for t in tables if not t.in_report]
    if files_only:
        blocks.append(Block("p", "Written as table files only (long): " + ", ".join(
            f"{name} (tables/{name}.csv, .md, .tex)" for name in files_only) + "."))
    blocks.append(Block("h2", "Figures"))
    for f in figures:
        if f.skipped:
            blocks.append(Block("p", f"{f.name}: not drawn ({f.skipped})."))
        else:
            png = next(p for p in f.files if p.suffix == ".png")
            blocks.append(Block("figure", (f"{fig_dir}/{png.name}", f.caption, f.name)))
    blocks.append(Block("h2", "Notes"))
    blocks.append(Block("list", a.notes + d.notes))
    return blocks


def failure_blocks(a: Analysis) -> list[Block]:
    """Design invariant 10: every unit that ended on an error (a model call that failed for good,
    or the method raising), with its error."""
    blocks = [Block("h2", "Failed model calls")]
    errored = [(name, t, r, e) for name, m in a.methods.items() for t, r, e in m.errors]
    counts = "; ".join(f"{display(name)}: {m.errored_units} errored unit(s), {m.failed_calls} failed call(s)"
                       for name, m in a.methods.items())
    if not errored:
        blocks.append(Block("p", f"No unit ended on a model call that failed for good or on the method raising "
                                 f"({counts})."))
        return blocks
    blocks.append(Block("p", f"{len(errored)} unit(s) ended on an error, a model call that failed for good or the "
                             f"method raising ({counts}); each "
                             f"is scored on what it had submitted by then. `{RunFolder(a.data.first.path).launcher()} "
                             "compare --resume RUN --retry-errors` runs them again from their recorded calls."))
    blocks.append(Block("list", [f"{display(name)} / {t} / repeat {r}: {e}" for name, t, r, e in errored]))
    return blocks


def example_blocks(a: Analysis) -> list[Block]:
    """What the one-shot leak guard let through: per method, the examples calls showed and
    their largest and mean similarity to the task's answer."""
    guard = a.data.first.oneshot
    if not any(m.examples for m in a.methods.values()) and not guard:
        return []
    where = (f"corpus {guard.get('corpus', 'builtin')} ({guard.get('programs', '?')} programs), examples at or above "
             f"similarity {guard.get('threshold')} to the task's answer never shown; similarity: "
             f"{guard.get('similarity')}") if guard else "corpus and guard not recorded (an older run)"
    lines = []
    for name, m in a.methods.items():
        if m.examples:
            lines.append(f"{display(name)}: {m.examples} example(s) shown; similarity to the task's answer max "
                         f"{m.example_similarity_max:.3f}, mean {m.example_similarity_mean:.3f}")
        else:
            lines.append(f"{display(name)}: no one-shot example shown")
    return [Block("h2", "One-shot examples"), Block("p", where + "."), Block("list", lines)]


def render_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if b.kind == "h1":
            out.append(f"# {b.content}\n")
        elif b.kind == "h2":
            out.append(f"## {b.content}\n")
        elif b.kind == "banner":
            out.append(f"> **{b.content}**\n")
        elif b.kind == "p":
            out.append(f"{b.content}\n")
        elif b.kind == "list":
            out.append("\n".join(f"- {x}" for x in b.content) + "\n")
        elif b.kind == "table":
            out.append(to_markdown(b.content))
        elif b.kind == "figure":
            src, caption, name = b.content
            out.append(f"![{name}]({src})\n\n_{caption}_\n")
    return "\n".join(out)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.text.columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>"
                   for r in t.text.itertuples(index=False))
    title = html.escape(t.title + (" (SIMULATED MODEL)" if t.simulated else ""))
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in t.notes)
    return f"<h3>{title}</h3><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}"


_CSS = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.4}"
        "table{border-collapse:collapse;margin:0.5em 0;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 6px;"
        "text-align:right}td:first-child,th:first-child{text-align:left}.banner{background:#fff3cd;border:2px solid "
        "#d39e00;padding:0.6em;font-weight:bold}.note{font-size:0.85em;color:#555}img{max-width:100%}")


def render_html(blocks: list[Block], title: str) -> str:
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        if b.kind in ("h1", "h2"):
            out.append(f"<{b.kind}>{html.escape(b.content)}</{b.kind}>")
        elif b.kind == "banner":
            out.append(f"<p class='banner'>{html.escape(b.content)}</p>")
        elif b.kind == "p":
            out.append(f"<p>{html.escape(b.content)}</p>")
        elif b.kind == "list":
            out.append("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in b.content) + "</ul>")
        elif b.kind == "table":
            out.append(_html_table(b.content))
        elif b.kind == "figure":
            src, caption, name = b.content
            out.append(f"<figure><img src='{html.escape(src)}' alt='{html.escape(name)}'>"
                       f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def default_out(paths: list[Path], leaf: str) -> Path:
    """RUN-report (or RUN-figures) beside the run folder for one run, RUN-<leaf>-combined-N beside
    the first for several (record.run_folder.output_folder): never inside a run folder."""
    return output_folder(paths, leaf)


def writable_folder(path: Path) -> Path:
    """`path`, made if missing; RunError (one line) when it cannot be, before any work is done."""
    try:
        ensure_writable(path)
    except OSError as exc:
        raise RunError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path


def write_report(paths: list[Path], out_dir: Path | None = None, fmt: str = "md", n_resamples: int = 10_000,
                 seed: int = 0, allow_same_seed: bool = False) -> ReportFiles:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    data = load_runs(paths, allow_same_seed)
    out_dir = writable_folder(Path(out_dir) if out_dir is not None else default_out(list(paths), "report"))
    progress = runs_progress([i.path for i in data.infos])
    a = analyse(data, n_resamples, seed)
    tables = build_tables(a)
    if not progress.complete:
        say_partial(tables, progress)
    table_files = write_tables(tables, out_dir / "tables")
    figures = write_figures(a, out_dir / "figures", partial=not progress.complete)
    blocks = build_blocks(a, tables, figures, "figures", progress)
    report = out_dir / f"report.{fmt}"
    title = "Kernel-method comparison report" + (" (SIMULATED MODEL)" if data.simulated else "")
    report.write_text(render_markdown(blocks) if fmt == "md" else render_html(blocks, title))
    return ReportFiles(report, table_files, figures, progress.banner())


def say_partial(tables: list[Table], progress: RunProgress) -> None:
    """Every table of a partial run says, in its notes, that it holds only finished units."""
    absent = [display(m) for m, n in progress.planned.items() if n and not progress.done.get(m)]
    note = (f"Partial run: only the {progress.units_done} finished units of {progress.units_planned} planned "
            f"({progress.per_method()})" + (f"; absent: {', '.join(absent)}" if absent else "") + ".")
    for t in tables:
        t.notes.append(note)


@dataclass
class FigureFiles:
    figures: list[FigureResult]
    banner: str | None = None  # the partial-run banner, None for a finished run


def write_figures_only(paths: list[Path], out_dir: Path | None = None, n_resamples: int = 10_000,
                       seed: int = 0, style: FigureStyle | None = None,
                       allow_same_seed: bool = False) -> FigureFiles:
    """The report's figures alone, in `style` (results/figure_style.py; default: the report's)."""
    data = load_runs(paths, allow_same_seed)
    out_dir = writable_folder(Path(out_dir) if out_dir is not None else default_out(list(paths), "figures"))
    progress = runs_progress([i.path for i in data.infos])
    figures = write_figures(analyse(data, n_resamples, seed), out_dir, style, partial=not progress.complete)
    return FigureFiles(figures, progress.banner())
