"""Tables of adapted suites (GEAK-eval): the suite's own call and execution accuracy beside the
strict hidden pass, and how many hidden cases are shapes the suite never records."""

from __future__ import annotations

import pandas as pd

from results.analysis import Analysis
from results.readers import UNIT_KEY, RunData
from results.tables.cells import (
    Table,
    band,
    make_table,
    put,
)
from results.verdicts import display

SUITE_PROFILE_SUFFIX = "@geak-eval"
RAN_VERDICTS = ("correct", "wrong_result", "no_kernel")


def suite_check_units(data: RunData) -> pd.DataFrame:
    """Units whose final submission was also judged by the suite's own check (the `geak-eval`
    profile of an adapted task), with `suite_call` (it imported and its entry point ran) and
    `suite_exec` (correct on the suite's own calls at GEAK-eval's tolerance)."""
    ev = data.evaluations
    prof = ev[(ev["case_set"] == "hidden") & ev["task"].astype(str).str.endswith(SUITE_PROFILE_SUFFIX)]
    if prof.empty or data.submissions.empty:
        return pd.DataFrame()
    verdict = {(h, t[: -len(SUITE_PROFILE_SUFFIX)]): v for h, t, v in zip(prof["source_hash"], prof["task"],
                                                                         prof["verdict"], strict=True)}
    last = data.submissions.sort_values("submission_index").groupby(UNIT_KEY).tail(1)
    final = {tuple(k): h for k, h in zip(last[UNIT_KEY].itertuples(index=False), last["source_hash"], strict=True)}
    units = data.units.copy()
    units["suite_verdict"] = [verdict.get((final.get((m, t, r)), t)) for m, t, r in
                              zip(units["method"], units["task"], units["repeat"], strict=True)]
    units = units[units["suite_verdict"].notna()].copy()
    units["suite_call"] = units["suite_verdict"].isin(RAN_VERDICTS)
    units["suite_exec"] = units["suite_verdict"] == "correct"
    return units


def suite_check_table(a: Analysis) -> Table | None:
    """GEAK-eval's call and execution accuracy beside the strict hidden pass, per method, on
    the adapted tasks, so a reader sees how much the stricter oracle changes a claim."""
    units = suite_check_units(a.data)
    if units.empty:
        return None
    rows = []
    for m in a.data.methods:
        mu = units[units["method"] == m]
        if mu.empty:
            continue
        num: dict = {"method": m, "tasks": mu["task"].nunique(), "units": len(mu)}
        txt: dict = {"method": display(m), "tasks": str(num["tasks"]), "units": str(num["units"])}
        for col, label in (("suite_call", "call accuracy"), ("suite_exec", "GEAK-eval exec accuracy"),
                           ("submitted_pass", "strict pass")):
            per_task = mu.groupby("task")[col].mean().to_numpy(float)  # tasks are the unit, as everywhere
            put(num, txt, label, col, band(per_task, a), rate=True)
        rows.append((num, txt))
    notes = ["Of the final submission on adapted GEAK-eval tasks. Call accuracy: the code imports and its entry "
             "point runs on the suite's own calls. GEAK-eval exec accuracy: correct on the suite's own calls at "
             "atol 1e-2 / rtol 1e-1 (GEAK-eval's tolerance), with the toolkit's other checks (poisoned outputs, "
             "unchanged inputs, a Triton kernel must run). Strict pass: the hidden cases (value permutations, new "
             "shapes, per-dtype tolerances)."]
    return make_table("suite_check", "GEAK-eval's metrics beside the strict pass", rows, a, notes)


def new_shapes_table(a: Analysis) -> Table | None:
    """How many of each adapted task's hidden cases are shapes the suite never records: the
    slots declared, and those kept (the reference runs on a perturbation for them), read from
    a correct hidden verdict's skipped cases."""
    declared: dict[str, int] = {}
    for info in a.data.infos:
        declared.update(info.new_shape_slots)
    if not declared:
        return None
    ev = a.data.evaluations
    ok = ev[(ev["case_set"] == "hidden") & (ev["verdict"] == "correct") & ev["task"].isin(list(declared))]
    rows = []
    for task in sorted(declared):
        judged = ok[ok["task"] == task]
        num: dict = {"task": task, "declared": declared[task]}
        if judged.empty:
            num["kept"] = float("nan")
        else:
            unused = sum(1 for r in judged["skip_reasons"].iloc[0] if str(r).startswith("hidden-shape"))
            num["kept"] = declared[task] - unused
        txt = {"task": task, "new-shape cases declared": str(declared[task]),
               "kept (the reference runs there)": "n/a (no correct verdict)" if judged.empty else str(num["kept"])}
        rows.append((num, txt))
    notes = ["Each recorded size grown just above itself and to a large odd size (at least 3001), one size at a "
             "time; a slot is kept where the suite's reference runs on such a shape. Known once some candidate "
             "(or the reference) has passed the task's hidden cases."]
    return make_table("new_shapes", "Hidden cases that are new shapes, per adapted task", rows, a, notes)
