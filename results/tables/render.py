"""Writing tables: Markdown, LaTeX and CSV per table, and tables.json beside them (title, notes,
the simulated label) for whoever reads the CSVs."""

from __future__ import annotations

import json
from pathlib import Path

from results.labels import SIMULATED_BANNER
from results.tables.cells import (
    Table,
)


def _md_cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_markdown(t: Table, heading: bool = True) -> str:
    lines = []
    if heading:
        lines.append(f"**{t.title}**" + (" (SIMULATED MODEL)" if t.simulated else ""))
        lines.append("")
    if t.simulated and not heading:
        lines.append(f"_{SIMULATED_BANNER}_")
        lines.append("")
    cols = list(t.text.columns)
    lines.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for _, row in t.text.iterrows():
        lines.append("| " + " | ".join(_md_cell(row[c]) for c in cols) + " |")
    for n in t.notes:
        lines.append("")
        lines.append(f"_{n}_")
    return "\n".join(lines) + "\n"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(s: object) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(s))


def to_latex(t: Table) -> str:
    cols = list(t.text.columns)
    out = []
    if t.simulated:
        out.append(f"% {SIMULATED_BANNER}")
    caption = t.title + (" (SIMULATED MODEL)" if t.simulated else "")
    out += [r"\begin{table}[t]", r"\centering", r"\small", f"\\caption{{{tex_escape(caption)}}}",
            f"\\label{{tab:{t.name}}}", r"\begin{tabular}{" + "l" * min(2, len(cols)) + "r" * max(0, len(cols) - 2) + "}",
            r"\toprule", " & ".join(tex_escape(c) for c in cols) + r" \\", r"\midrule"]
    for _, row in t.text.iterrows():
        out.append(" & ".join(tex_escape(row[c]) for c in cols) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    for n in t.notes:
        out.append(f"\\par\\footnotesize {tex_escape(n)}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def to_csv(t: Table) -> str:
    """Plain CSV that `pandas.read_csv` reads as it is: the numbers, plus a `simulated` column
    (the label travels with every row; a comment line would break readers). Title, notes and
    the label are also in the folder's tables.json (write_tables)."""
    return t.numeric.assign(simulated=t.simulated).to_csv(index=False)


TABLES_SIDECAR = "tables.json"


def write_tables(tables: list[Table], out_dir: Path) -> list[Path]:
    """Markdown, LaTeX and CSV per table, and tables.json: per table its title, notes and whether
    it comes from the simulated model (SIMULATED_BANNER then), for whoever reads the CSVs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in tables:
        for ext, text in (("md", to_markdown(t, heading=False)), ("tex", to_latex(t)), ("csv", to_csv(t))):
            p = out_dir / f"{t.name}.{ext}"
            p.write_text(text)
            paths.append(p)
    sidecar = out_dir / TABLES_SIDECAR
    sidecar.write_text(json.dumps({t.name: {"title": t.title, "notes": list(t.notes), "simulated": t.simulated,
                                            "label": SIMULATED_BANNER if t.simulated else None,
                                            "csv": f"{t.name}.csv"} for t in tables}, indent=2) + "\n")
    return paths + [sidecar]
