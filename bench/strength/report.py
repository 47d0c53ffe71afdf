"""Records, scores, table, CSV and figure of a test-strength run (issue 44).

A mutant is judged three ways (`JUDGES`): by the suite's own tests (the built-in suite's
visible cases; GEAK-eval's execution-accuracy check where an adapted task has it), by the
toolkit's hidden cases, and by a much larger seeded stress set, the ground truth. A judge
*kills* a mutant when its verdict is anything but `correct`.

Which mutants count. A mutant that computes, bit for bit, what the expert computes on every
case drawn and on a larger differential set is `equivalent`; one whose outputs differ but that
every judge accepts (the stress set included) is `tolerated`: within the contract's
tolerances wherever anyone looked (a reordered sum, a cast that rounds alike), or wrong only on
inputs no set draws. Both are set apart. The rest, killed by at least one judge, are the
non-equivalent mutants, and a judge's mutation score is the share of them it kills, with a
Wilson 95% interval (stats.intervals.wilson_ci). A suite's score pools its tasks' mutants;
mutants of one task are not independent draws, so the pooled interval is optimistic.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stats.intervals import wilson_ci

JUDGES = ("suite", "hidden", "stress")
JUDGE_TITLES = {"suite": "suite tests", "hidden": "hidden cases", "stress": "stress (truth)"}
EQUIVALENT = "equivalent"
TOLERATED = "tolerated"
NON_EQUIVALENT = "non_equivalent"
CORRECT = "correct"


@dataclass(frozen=True)
class MutantOutcome:
    """One mutant's three verdicts and its class. `suite_call`: GEAK-eval's call accuracy (the
    mutant imports and runs on the suite's calls) where the suite has that check, else None.
    `differs_on`: the first case where its outputs differ from the expert's ("" when none)."""

    suite_name: str
    task: str
    mutant: str
    operator: str
    line: int
    description: str
    suite_verdict: str
    hidden_verdict: str
    stress_verdict: str
    status: str
    differs_on: str = ""
    suite_call: bool | None = None
    first_failure: str = ""

    def verdict(self, judge: str) -> str:
        return str(getattr(self, f"{judge}_verdict"))

    def killed(self, judge: str) -> bool:
        return self.verdict(judge) != CORRECT


@dataclass(frozen=True)
class Score:
    """`killed` of `total` non-equivalent mutants, with the Wilson 95% interval (None when total is 0)."""

    killed: int
    total: int
    lo: float | None
    hi: float | None

    @property
    def value(self) -> float | None:
        return self.killed / self.total if self.total else None

    def text(self) -> str:
        if not self.total:
            return "n/a"
        assert self.lo is not None and self.hi is not None
        return f"{self.killed}/{self.total} {self.killed / self.total:4.0%} [{self.lo:.0%}-{self.hi:.0%}]"


def score(outcomes: Iterable[MutantOutcome], judge: str) -> Score:
    pool = [o for o in outcomes if o.status == NON_EQUIVALENT]
    killed = sum(o.killed(judge) for o in pool)
    if not pool:
        return Score(0, 0, None, None)
    est = wilson_ci(killed, len(pool))
    return Score(killed, len(pool), est.lo, est.hi)


@dataclass(frozen=True)
class TaskNote:
    """A task left out of the scores, or a remark on its stress set, with the reason."""

    task: str
    note: str


@dataclass
class StrengthReport:
    """A whole run: its options (what makes it reproducible) and one outcome per mutant."""

    suite_name: str
    device: str
    seed: int
    mutants_per_task: int
    tasks: list[str]
    outcomes: list[MutantOutcome] = field(default_factory=list)
    notes: list[TaskNote] = field(default_factory=list)
    stress_cases: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def of_task(self, task: str) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.task == task]

    def rows(self) -> list[dict[str, Any]]:
        """One row per task with mutants, then one for the suite (all its tasks pooled)."""
        out = []
        groups = [(t, self.of_task(t)) for t in self.tasks if self.of_task(t)]
        groups.append((f"[suite {self.suite_name}]", self.outcomes))
        for name, group in groups:
            row: dict[str, Any] = {"task": name, "mutants": len(group),
                                   "equivalent": sum(o.status == EQUIVALENT for o in group),
                                   "tolerated": sum(o.status == TOLERATED for o in group),
                                   "non_equivalent": sum(o.status == NON_EQUIVALENT for o in group)}
            for judge in JUDGES:
                s = score(group, judge)
                row[f"{judge}_killed"] = s.killed
                row[f"{judge}_score"] = s.value
                row[f"{judge}_lo"] = s.lo
                row[f"{judge}_hi"] = s.hi
            out.append(row)
        return out

    def only_hidden(self) -> list[MutantOutcome]:
        """Non-equivalent mutants the suite's tests accept and the hidden cases reject."""
        return [o for o in self.outcomes if o.status == NON_EQUIVALENT and not o.killed("suite") and o.killed("hidden")]

    def survive_both(self) -> list[MutantOutcome]:
        """Non-equivalent mutants both the suite's tests and the hidden cases accept (the stress set kills them)."""
        return [o for o in self.outcomes
                if o.status == NON_EQUIVALENT and not o.killed("suite") and not o.killed("hidden")]

    def tolerated(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.status == TOLERATED]

    def to_json(self) -> dict[str, Any]:
        return {"suite": self.suite_name, "device": self.device, "seed": self.seed,
                "mutants_per_task": self.mutants_per_task, "tasks": self.tasks, "rows": self.rows(),
                "outcomes": [asdict(o) for o in self.outcomes], "notes": [asdict(n) for n in self.notes],
                "stress_cases": self.stress_cases, "seconds": self.seconds}


def format_table(report: StrengthReport) -> str:
    """The score table: per task and for the suite, each judge's killed / non-equivalent with
    its Wilson interval. Holds nothing that varies between runs of one seed (no timings)."""
    head = (f"{'task':<24} {'mut':>4} {'eqv':>4} {'tol':>4} {'n-eq':>5}  "
            + "  ".join(f"{JUDGE_TITLES[j]:<22}" for j in JUDGES))
    lines = [f"test strength of suite {report.suite_name} on {report.device}, seed {report.seed}, "
             f"up to {report.mutants_per_task} mutants per task", head]
    for row in report.rows():
        cells = []
        for j in JUDGES:
            s = Score(row[f"{j}_killed"], row["non_equivalent"], row[f"{j}_lo"], row[f"{j}_hi"])
            cells.append(f"{s.text():<22}")
        lines.append(f"{row['task']:<24} {row['mutants']:>4} {row['equivalent']:>4} {row['tolerated']:>4} "
                     f"{row['non_equivalent']:>5}  " + "  ".join(cells))
    return "\n".join(line.rstrip() for line in lines)


def _mutant_line(o: MutantOutcome) -> str:
    return (f"  {o.mutant} (line {o.line}): {o.description}; suite {o.suite_verdict}, hidden {o.hidden_verdict}, "
            f"stress {o.stress_verdict}" + (f" [{o.first_failure}]" if o.first_failure else ""))


def format_report(report: StrengthReport) -> str:
    """The table, then the mutants that only the hidden cases kill, those that survive both the
    suite's tests and the hidden cases, the tolerated ones, and the notes."""
    lines = [format_table(report), ""]
    only = report.only_hidden()
    lines.append(f"killed by the hidden cases, accepted by the suite's tests: {len(only)}")
    lines += [_mutant_line(o) for o in only]
    both = report.survive_both()
    lines.append(f"accepted by both the suite's tests and the hidden cases (only the stress set kills them): "
                 f"{len(both)}")
    lines += [_mutant_line(o) for o in both]
    tol = report.tolerated()
    lines.append(f"tolerated (outputs differ from the expert's, every judge accepts them): {len(tol)}")
    lines += [_mutant_line(o) + (f"; differs on {o.differs_on}" if o.differs_on else "") for o in tol]
    for n in report.notes:
        lines.append(f"note: {n.task}: {n.note}")
    return "\n".join(lines)


def write_csv(report: StrengthReport, folder: Path) -> tuple[Path, Path]:
    """`scores.csv` (the table's rows) and `mutants.csv` (one row per mutant); plain CSV."""
    folder.mkdir(parents=True, exist_ok=True)
    scores, mutants = folder / "scores.csv", folder / "mutants.csv"
    rows = report.rows()
    with scores.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["suite", "seed", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"suite": report.suite_name, "seed": report.seed, **r})
    with mutants.open("w", newline="") as f:
        names = list(MutantOutcome.__dataclass_fields__)
        w = csv.DictWriter(f, fieldnames=["seed", *names])
        w.writeheader()
        for o in report.outcomes:
            w.writerow({"seed": report.seed, **asdict(o)})
    return scores, mutants


def draw_figure(report: StrengthReport, path: Path) -> Path | None:
    """Score per task, the suite's tests beside the hidden cases (and the stress set), with
    Wilson intervals as error bars. None when no task has a non-equivalent mutant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report.rows() if r["non_equivalent"]]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(rows) + 2), 3.6))
    width = 0.27
    styles = {"suite": ("#bbbbbb", "//"), "hidden": ("#333333", ""), "stress": ("#ffffff", "..")}
    for k, judge in enumerate(JUDGES):
        xs = [i + (k - 1) * width for i in range(len(rows))]
        ys = [r[f"{judge}_score"] for r in rows]
        # Clipped at 0: statsmodels' Wilson bound for k = n can come out a rounding error below k/n.
        err = [[max(0.0, y - r[f"{judge}_lo"]) for y, r in zip(ys, rows, strict=True)],
               [max(0.0, r[f"{judge}_hi"] - y) for y, r in zip(ys, rows, strict=True)]]
        colour, hatch = styles[judge]
        ax.bar(xs, ys, width, yerr=err, color=colour, hatch=hatch, edgecolor="black", linewidth=0.5,
               capsize=1.5, error_kw={"linewidth": 0.6}, label=JUDGE_TITLES[judge])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["task"] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("killed / non-equivalent", fontsize=8)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    ax.set_title(f"{report.suite_name}: seed {report.seed}, {report.device}", fontsize=8, pad=18)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
