"""The paired comparisons table: every method pair on submitted pass and speedup, the paired
t-test deciding, the tests beside it and the smallest difference the run could detect."""

from __future__ import annotations

import math

import numpy as np

from results.analysis import Headline
from results.labels import range_text
from results.tables.cells import (
    Table,
    budget_word,
    make_table,
)
from results.verdicts import display


def comparisons_table(a: Headline) -> Table:
    rows = []
    nan = float("nan")
    for c in a.comparisons:
        is_pass = c.metric == "submitted pass"
        scale = 100.0 if is_pass else 1.0
        suffix = " pts" if is_pass else "x"
        flip, mc, wil = c.beside_test("sign-flip"), c.beside_test("mcnemar"), c.beside_test("wilcoxon")
        w = c.without_errors
        num = {"a": c.a, "b": c.b, "metric": c.metric, "tasks": c.n_tasks, "tested": c.tested,
               "min_tasks": c.min_tasks, "decided_by": c.decided_by, "value": c.value * scale,
               "t_lo": c.t_interval.lo * scale, "t_hi": c.t_interval.hi * scale,
               "boot_lo": c.boot_interval.lo * scale, "boot_hi": c.boot_interval.hi * scale,
               "test": c.test.method, "statistic": c.test.statistic, "tasks_a_better": c.test.n10,
               "tasks_b_better": c.test.n01, "p": c.test.pvalue, "p_adjusted": c.p_adjusted,
               "adjust_method": c.adjust_method, "p_sign_flip": flip.pvalue if flip else nan,
               "p_wilcoxon": wil.pvalue if wil else nan,
               "discordant_a": mc.n10 if mc else np.nan, "discordant_b": mc.n01 if mc else np.nan,
               "p_mcnemar_one_repeat": mc.pvalue if mc and c.one_repeat else nan,
               "mde": c.mde.value * scale if is_pass else c.mde.value,
               "errored_a": c.errored[0], "errored_b": c.errored[1],
               "without_errors_tasks": w.n_tasks if w else np.nan,
               "without_errors_value": w.value * scale if w else nan,
               "without_errors_p": w.p if w else nan}
        d = 1 if is_pass else 2
        estimate = f"{num['value']:+.{d}f}{suffix}" if is_pass else f"{num['value']:.{d}f}{suffix}"
        mde = c.mde.value
        if not c.tested:
            txt = {"comparison": f"{display(c.a)} vs {display(c.b)}", "metric": c.metric, "tasks": str(c.n_tasks),
                   "estimate (a - b; a/b for speedup)": "-", "95% t CI": "-",
                   "tasks better a/b": f"{c.test.n10}/{c.test.n01}", "decided by": "-", "paired t p": "-",
                   f"p ({c.adjust_method})": "-", "sign-flip p": "-", "beside": "-",
                   "verdict": f"too few tasks to test (< {c.min_tasks})", "detectable from": "-",
                   "errored a/b": f"{c.errored[0]}/{c.errored[1]}"}
            rows.append((num, txt))
            continue
        txt = {"comparison": f"{display(c.a)} vs {display(c.b)}", "metric": c.metric, "tasks": str(c.n_tasks),
               "estimate (a - b; a/b for speedup)": estimate,
               "95% t CI": range_text(c.t_interval.lo, c.t_interval.hi, d, scale, what="every task "),
               "tasks better a/b": f"{c.test.n10}/{c.test.n01}", "decided by": "paired t",
               "paired t p": _pv(c.test.pvalue), f"p ({c.adjust_method})": _pv(c.p_adjusted),
               "sign-flip p": _pv(flip.pvalue) if flip else "-",
               "beside": (f"McNemar discordant {mc.n10}/{mc.n01}" + (f", p {_pv(mc.pvalue)}" if c.one_repeat else
                                                                    " (descriptive: repeats)") if mc else
                          f"Wilcoxon p {_pv(wil.pvalue)} (n {wil.n})" if wil else "-"),
               "verdict": "detectable" if c.significant else "no detectable difference",
               "detectable from": ("n/a" if not np.isfinite(mde) else
                                   f"{100 * mde:.0f} pts" if is_pass else f"{mde:.2f}x"),
               "errored a/b": f"{c.errored[0]}/{c.errored[1]}"}
        rows.append((num, txt))
    minimum = next((c.min_tasks for c in a.comparisons), 0)
    return make_table("comparisons", f"Paired comparisons at {a.data.budget} {budget_word(a.data)} (every method pair)", rows, a,
                  ["Tasks are the unit: pass differences in percentage points are means of per-task differences "
                   "(each method's per-task pass averaged over repeats). The verdict is decided by the paired t-test "
                   "on those differences, and the t interval on the same differences is the one printed beside it "
                   "(they agree before adjustment); p-values adjusted together (Holm). The paired BCa bootstrap is "
                   "in the CSV only (boot_lo, boot_hi), as a description: it rejects a true null more often than "
                   "5% (the coverage simulation). The sign-flip permutation test on the same differences is shown "
                   f"for small suites. A comparison over fewer than {minimum} tasks gets no test and no interval: no "
                   "exact test over so few tasks could reach the report's alpha over its family of verdicts "
                   "(counts only). McNemar over (task, repeat) pairs treats repeats as independent: its counts are "
                   "descriptive, its p-value shown only with one repeat. Speedups as geometric-mean ratios on tasks "
                   "where both are correct (unflagged timings). 'detectable from': the smallest difference the test "
                   "detects with power 0.8 at alpha 0.05 (before adjustment). 'errored a/b': units that ended on an "
                   "error; the CSV has the comparison with them left out."])


def _pv(p: float) -> str:
    return "n/a" if not math.isfinite(p) else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")
