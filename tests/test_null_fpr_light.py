"""Size of the paired verdict under "no difference" (scripts/null_fpr_sim.py at a light size):
the paired t-test on per-task differences stays near 5% with repeats and task-by-method
variation, where McNemar over (task, repeat) pairs (the old verdict) rejects far more often."""

from __future__ import annotations

import pytest

from tests.helpers import script_module


@pytest.mark.slow
def test_paired_t_holds_its_size_where_unit_mcnemar_does_not() -> None:
    sim = script_module("null_fpr_sim")
    cfg = sim.NullConfig(task_counts=(30,), repeats=(5,), interaction_sd=(1.0,), sign_flip_resamples=200)
    res = sim.simulate_null(400, seed=3, cfg=cfg).set_index("test")
    assert set(res["reps"]) == {400}
    t, mc = res.loc["paired t", "rate"], res.loc["McNemar (task, repeat)", "rate"]
    assert 0.02 <= t <= 0.085  # 0.05 within about 3 s.e. (0.011)
    assert mc >= 0.10 and mc > t + 0.05  # about 0.15: repeats counted as independent
