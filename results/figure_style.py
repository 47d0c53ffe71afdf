"""How figures look and how they are saved: camera-ready by default, one style for all.

Why a module of its own: every figure must follow the same rules, and reviewers and
submission checkers test exactly these:
- sizes: `paper` style draws at the column widths of two-column venues (3.25 in single,
  6.75 in double column) with 8 pt text; the default style is larger, for screens;
- files: PNG at 300 dpi, vector PDF and SVG with TrueType text (pdf.fonttype 42, never
  Type 3 fonts, which some submission systems reject; SVG keeps text as text); the formats
  are a choice (`--format png,pdf,svg`);
- no baked-in titles in `paper` style (captions belong to the paper), unless `--titles`;
- every method keeps one colour, line style, marker and hatch in every figure of a run,
  from a colour-blind-safe palette (Okabe and Ito), and bands are told apart without colour
  too: hatched, outlined and light, so overlapping bands stay attributable in grayscale;
- the SIMULATED label (and PARTIAL RUN for an unfinished run) is a watermark inside every
  axes, so cropping a title or caption cannot remove it (invariant 7);
- the numbers a figure plots are written beside it as `<name>.csv` (plain CSV, with a
  `simulated` column), so a reader can check or redraw it.

matplotlib is imported inside functions (Agg backend): importing this module is free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

STYLES = ("default", "paper")
FIGURE_FORMATS = ("png", "pdf", "svg")
SINGLE_COLUMN_IN = 3.25
DOUBLE_COLUMN_IN = 6.75

# Okabe & Ito's colour-blind-safe palette; the built-in methods keep theirs in every run.
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
_BUILTIN = ("direct", "reflexion", "geak")
_LINES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)), (0, (8, 2)), (0, (3, 1, 1, 1)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_HATCHES = ("////", "\\\\\\\\", "....", "xxxx", "++++", "||||", "----", "oooo")
WATERMARK_ZORDER = 20.0  # above lines (2), collections (1), texts (3) and legends (5)


@dataclass(frozen=True)
class MethodLook:
    color: str
    line: Any  # a matplotlib line style
    marker: str
    hatch: str


def method_looks(methods: Sequence[str]) -> dict[str, MethodLook]:
    """One look per method, fixed for the built-ins (direct, reflexion, geak get the first three)
    and by first appearance for the others, so a method looks the same in every figure of a run."""
    slots = list(_BUILTIN) + [m for m in methods if m not in _BUILTIN]
    out = {}
    for m in methods:
        i = slots.index(m) % len(_PALETTE)
        out[m] = MethodLook(_PALETTE[i], _LINES[i], _MARKERS[i], _HATCHES[i])
    return out


@dataclass(frozen=True)
class FigureStyle:
    """How to draw and save; `make` builds the two named styles."""

    name: str = "default"
    formats: tuple[str, ...] = ("png", "pdf")
    dpi: int = 300
    titles: bool = True
    font_size: float = 10.0
    single_width: float = 6.5  # inches
    double_width: float = 11.0
    watermark: str | None = None  # drawn inside every axes (SIMULATED MODEL, PARTIAL RUN)

    @classmethod
    def make(cls, name: str = "default", formats: Sequence[str] | None = None,
             titles: bool | None = None) -> FigureStyle:
        """`default`: screen sizes, titles on; `paper`: column widths, 8 pt, no titles. ValueError
        (one line) for an unknown style or format."""
        if name not in STYLES:
            raise ValueError(f"figure style must be one of {', '.join(STYLES)}, got {name!r}")
        chosen = tuple(formats) if formats else ("png", "pdf")
        bad = [f for f in chosen if f not in FIGURE_FORMATS]
        if bad or not chosen:
            raise ValueError(f"figure formats must be among {', '.join(FIGURE_FORMATS)}, got {', '.join(bad) or 'none'}")
        if name == "paper":
            style = cls("paper", chosen, 300, False, 8.0, SINGLE_COLUMN_IN, DOUBLE_COLUMN_IN)
        else:
            style = cls("default", chosen)
        return style if titles is None else replace(style, titles=titles)

    def with_watermark(self, simulated: bool, partial: bool) -> FigureStyle:
        parts = (["SIMULATED MODEL"] if simulated else []) + (["PARTIAL RUN"] if partial else [])
        return replace(self, watermark="\n".join(parts) or None)

    def size(self, width: str = "single", aspect: float = 0.62) -> tuple[float, float]:
        """(width, height) in inches: `single` or `double` column, height = aspect x width."""
        w = self.single_width if width == "single" else self.double_width
        return (w, round(w * aspect, 3))

    def rc(self) -> dict[str, Any]:
        small = self.font_size - 1
        return {
            "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none",  # TrueType in PDF, text in SVG
            "font.family": "DejaVu Sans", "font.size": self.font_size, "axes.titlesize": self.font_size + 1,
            "axes.labelsize": self.font_size, "legend.fontsize": small, "xtick.labelsize": small,
            "ytick.labelsize": small, "axes.spines.top": False, "axes.spines.right": False,
            "axes.linewidth": 0.8, "lines.linewidth": 1.6 if self.name == "paper" else 2.0,
            "lines.markersize": 4 if self.name == "paper" else 5, "hatch.linewidth": 0.6,
            "legend.frameon": False, "savefig.dpi": self.dpi, "figure.dpi": 100,
        }


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def drawing(style: FigureStyle) -> Iterator[Any]:
    """pyplot with the style's rcParams in force (drawing *and* saving must happen inside)."""
    plt = pyplot()
    with plt.rc_context(style.rc()):
        yield plt


def title(target: Any, text: str, style: FigureStyle, suptitle: bool = False) -> str:
    """Set an axes (or, with `suptitle`, a figure) title only when the style has titles; the text is
    returned either way, so the caller can record what the title would have said."""
    if style.titles:
        if suptitle:
            target.suptitle(text, fontsize=style.font_size + 1)
        else:
            target.set_title(text)
    return text


def watermark(ax: Any, style: FigureStyle) -> None:
    """The style's label across the middle of the axes, translucent and above everything drawn
    (a filled cell or band cannot hide it): inside the plotting area, so no crop that keeps the
    data loses it."""
    if not style.watermark:
        return
    # Sized to fit the axes (bold DejaVu runs about 0.65 em per character), never above 2.2x text,
    # where the axes end up: a layout engine (constrained layout) moves them when drawing.
    if ax.figure.get_layout_engine() is not None:
        ax.figure.draw_without_rendering()
    fig_w, fig_h = ax.figure.get_size_inches()
    pos = ax.get_position()
    width_pt, height_pt = fig_w * pos.width * 72, fig_h * pos.height * 72
    lines = style.watermark.splitlines()
    size = min(style.font_size * 2.2, 0.8 * width_pt / (0.65 * max(len(x) for x in lines)),
               0.6 * height_pt / (1.2 * len(lines)))
    # Above every artist of the axes (the highest zorder drawn there, whatever the figure drew), a
    # darker grey than the hatches under it. No path effect: it would turn the SVG's text into paths.
    top = max([a.get_zorder() for a in ax.get_children() if a is not ax.patch] + [0.0])
    mark = ax.text(0.5, 0.5, style.watermark, transform=ax.transAxes, ha="center", va="center", rotation=15,
                   fontsize=max(size, 5.0), fontweight="bold", color="#555555", alpha=0.3,
                   zorder=max(WATERMARK_ZORDER, top + 1), clip_on=True, linespacing=1.1)
    mark.set_gid("watermark")
    mark.set_in_layout(False)  # a label, not content: the layout must not make room for it


def band(ax: Any, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, look: MethodLook, step: str | None = None) -> None:
    """An interval band that stays attributable where bands overlap and in grayscale: a light
    fill, the method's hatch in its colour, and the whole band outlined in its colour and line
    style (a closed outline, so where two bands overlap each one's edge can be followed)."""
    kw: dict[str, Any] = {"step": step} if step else {}
    ax.fill_between(x, lo, hi, facecolor=look.color, alpha=0.10, lw=0, **kw)
    ax.fill_between(x, lo, hi, facecolor="none", edgecolor=look.color, hatch=look.hatch, alpha=0.45, lw=0, **kw)
    outline = ax.fill_between(x, lo, hi, facecolor="none", edgecolor=look.color, lw=1.0, ls=look.line, **kw)
    outline.set_gid("band-outline")


def band_handle(line: Any, look: MethodLook) -> tuple[Any, Any]:
    """A legend entry showing a method's line over its band (fill, hatch and outline), so the
    legend tells overlapping bands apart as well as lines."""
    from matplotlib.patches import Patch

    patch = Patch(facecolor=_tint(look.color), edgecolor=look.color, hatch=look.hatch, lw=1.0, ls=look.line)
    return (patch, line)


def _tint(color: str, share: float = 0.12) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (1 - share + share * r, 1 - share + share * g, 1 - share + share * b)


_LOG_MANTISSAS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0))


def log_ticks(lo: float, hi: float, least: int = 3) -> list[float]:
    """Labelled ticks for a log axis that must show [lo, hi]: the coarsest of decades, 1-2-5 and
    1-1.5-2-3-5-7 that puts at least `least` ticks in the range, the range widened around its
    geometric middle until one does (a narrow range, 0.75x to 1.02x, still gets 0.7, 1, 1.5)."""
    lo, hi = (float(lo), float(hi)) if lo <= hi else (float(hi), float(lo))
    if not (lo > 0 and np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"a log axis needs a positive, finite range, got {lo!r}..{hi!r}")
    while True:
        for mantissas in _LOG_MANTISSAS:
            decades = range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 2)
            inside = [float(f"{m * 10.0 ** e:.6g}") for e in decades for m in mantissas]
            inside = [t for t in inside if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
            if len(inside) >= least:
                return inside
        lo, hi = lo / 1.25, hi * 1.25


def log_axis(ax: Any, which: str, lo: float, hi: float, suffix: str = "", base: float = 10) -> list[float]:
    """Put `which` ("x" or "y") of `ax` on a log scale showing [lo, hi] with at least three
    labelled ticks (log_ticks) and no unlabelled minor ones; the limits reach a little past the
    outer ticks and the data. Returns the ticks."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    ticks = log_ticks(lo, hi)
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=base)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())
    low, high = min(lo, ticks[0]) / 1.1, max(hi, ticks[-1]) * 1.1
    (ax.set_xlim if which == "x" else ax.set_ylim)(low, high)
    return ticks


def save(fig: Any, out_dir: Path, name: str, style: FigureStyle, plotted: pd.DataFrame,
         simulated: bool) -> list[Path]:
    """Write the figure in every format of the style and `<name>.csv` with the plotted numbers
    (a `simulated` column added); close the figure. Returns the figure files, then the CSV."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in style.formats:
        path = out_dir / f"{name}.{fmt}"
        meta = {"Creator": "kernel-method-compare"} if fmt in ("pdf", "svg") else None
        fig.savefig(path, dpi=style.dpi, bbox_inches="tight", pad_inches=0.02, metadata=meta)
        paths.append(path)
    pyplot().close(fig)
    csv = out_dir / f"{name}.csv"
    plotted.assign(simulated=simulated).to_csv(csv, index=False)
    return paths + [csv]
