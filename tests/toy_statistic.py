"""A toy statistic, written from results/statistics.py's docstring alone.

First-try pass: per task, the share of its repeats whose first candidate (the method's first
proposal, before any feedback) passes the hidden cases; the suite figure is the mean over tasks,
with the band of a rate over tasks (none below the small-suite minimum). A unit that proposed
nothing has not passed on its first try.

It lives in tests/ on purpose: tests/test_toy_statistic.py registers it, and installs it as a
plugin through an entry point, and finds its column in the accuracy table and its field in
summary.json, which shows that a statistic needs no change outside its own file.
"""

from __future__ import annotations

from results.statistics import MethodRows, register_statistic
from stats import Estimate

UNIT = ["method", "task", "repeat"]


@register_statistic("first_try_pass")
class FirstTryPass:
    column = "first-try pass"
    table = "accuracy"
    interval = True
    rate = True
    note = ("First-try pass: mean over tasks of the share of repeats whose first candidate passes the hidden "
            "cases (tests/toy_statistic.py).")

    def compute(self, m: MethodRows) -> Estimate:
        first = m.candidates[m.candidates["candidate_index"] == 0][UNIT + ["hidden_pass"]]
        passed = m.units[UNIT].merge(first, on=UNIT, how="left")["hidden_pass"].eq(True)
        return m.band(m.per_task(passed.to_numpy(float)))
