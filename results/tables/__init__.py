"""Paper tables (Markdown, LaTeX, CSV) mirroring the GEAK paper's, each with intervals and
budget columns (calls, tokens, GPU evaluations per unit).

Tables: accuracy and speedup per method; by task difficulty; sequential scaling by
budget; parallel scaling by independent runs; fast_p; visible-test false positives;
latency noise per task; paired comparisons. Each is a `Table` holding a numeric frame
(written as CSV: one column per value and interval end, machine-readable) and a text
frame ("0.62 [0.41, 0.80]" cells, written as Markdown and LaTeX). Every file of a
simulated run carries the simulated-model label (invariant 7): a `#` comment line first in
CSV (read it with `pandas.read_csv(path, comment="#")`), a line above Markdown tables, a
`%` comment and the caption in LaTeX.

One module per family: cells.py (`Table` and the shared columns), per_method.py, comparisons.py,
suites.py (adapted suites), timing.py (latency, phases, job kinds, protocols) and render.py
(Markdown, LaTeX, CSV, tables.json); `build_tables` here lists them in the report's order, and
registered.py adds the columns of registered statistics (results/statistics.py).
"""

from __future__ import annotations

from results.analysis import Analysis
from results.tables.cells import Table
from results.tables.comparisons import comparisons_table
from results.tables.per_method import (
    accuracy_table,
    difficulty_table,
    false_positive_table,
    parallel_table,
    sequential_table,
    speedup_table,
    variance_table,
)
from results.tables.registered import statistic_columns
from results.tables.render import to_csv, to_latex, to_markdown, write_tables
from results.tables.suites import new_shapes_table, suite_check_table
from results.tables.timing import (
    job_kind_table,
    latency_cases_table,
    latency_table,
    phase_table,
    protocol_table,
)

__all__ = ["Table", "accuracy_table", "build_tables", "comparisons_table", "difficulty_table", "false_positive_table",
           "job_kind_table", "latency_cases_table", "latency_table", "new_shapes_table", "on_cpu", "parallel_table",
           "phase_table", "protocol_table", "sequential_table", "speedup_table", "suite_check_table", "to_csv",
           "to_latex", "to_markdown", "variance_table", "write_tables"]


def build_tables(a: Analysis) -> list[Table]:
    tables = [accuracy_table(a), variance_table(a), suite_check_table(a), new_shapes_table(a), difficulty_table(a),
              sequential_table(a), parallel_table(a), speedup_table(a), false_positive_table(a), latency_table(a),
              latency_cases_table(a), phase_table(a), job_kind_table(a), protocol_table(a),
              comparisons_table(a) if a.comparisons else None]
    built = [t for t in tables if t is not None]
    statistic_columns(built, a)  # registered statistics (results/statistics.py), in the tables they name
    if any(i.interpreter for i in a.data.infos):
        for t in built:
            on_cpu(t)
    return built


_GPU_WORDS = (("GPU evals", "evaluations"), ("GPU evaluations", "evaluations"))


def on_cpu(t: Table) -> None:
    """A run judged on the CPU interpreter ran no GPU: its tables say "evaluations" where a GPU
    run's say "GPU evals" (the count is the same: visible feedback plus the method's own test runs)."""
    def plain(text: str) -> str:
        for gpu, cpu in _GPU_WORDS:
            text = text.replace(gpu, cpu)
        return text

    t.text = t.text.rename(columns={c: plain(str(c)) for c in t.text.columns})
    t.title = plain(t.title)
    t.notes[:] = [plain(n) for n in t.notes]
    t.notes.append("Evaluations ran on the Triton CPU interpreter (no GPU).")
