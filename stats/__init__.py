"""Pure statistics for comparing kernel-writing methods at equal compute.

Arrays / pandas objects in, numbers and frozen dataclasses out. Imports nothing from the
rest of the project (only numpy, scipy, statsmodels, pandas and the standard library).

Modules: ``passk`` (unbiased pass@k), ``intervals`` (bootstrap / Wilson / exact CIs and the bands of rates over tasks),
``paired`` (paired t and sign-flip tests on per-task differences, paired bootstrap,
McNemar, Wilcoxon, p-value adjustment), ``power`` (power and minimum detectable difference
of the paired comparison), ``variance`` (between- and within-task variance, ICC, the
fixed-suite interval), ``speedup`` (geomean, fast_p), ``latency`` (timing noise),
``falsepos`` (visible-test false positives), ``curves`` (budget curves and pass@k over runs).
"""

from __future__ import annotations

from .curves import (
    CurveBand,
    PassAtKCurve,
    aggregate_curves,
    curve_by_task,
    oracle_curve,
    runs_pass_at_k,
    submitted_curve,
    task_mean_curves,
)
from .falsepos import visible_false_positive_rate
from .intervals import (
    BAND_METHODS,
    BOOTSTRAP_METHODS,
    RATE_BAND,
    ColumnIntervals,
    Estimate,
    band_columns,
    binary_ci,
    exact_ci,
    mean_band,
    mean_ci,
    mean_ci_columns,
    t_ci,
    wilson_ci,
)
from .latency import LatencyStats, flagged_share, latency_stats, median_ci
from .paired import (
    ADJUST_METHODS,
    SMALL_SUITE_MARGIN,
    PairedTest,
    adjust_pvalues,
    mcnemar_exact,
    min_tasks_to_reject,
    paired_diff_ci,
    paired_t_test,
    sign_flip_min_p,
    sign_flip_test,
    wilcoxon_log_ratio,
)
from .passk import pass_at_k, pass_at_k_table
from .power import (
    ALPHA,
    DEFAULT_ICC,
    DEFAULT_METHOD_CORRELATION,
    TARGET_POWER,
    PassVarianceModel,
    minimum_detectable_difference,
    one_repeat_cells,
    paired_power,
    ternary_mde,
    ternary_power,
)
from .speedup import (
    DEFAULT_FAST_PS,
    SpeedupSummary,
    fast_p,
    fast_p_table,
    geomean,
    geomean_ci,
    speedup_summary,
)
from .variance import VarianceComponents, fixed_suite_ci, variance_components

__all__ = [
    # passk
    "pass_at_k",
    "pass_at_k_table",
    # intervals
    "Estimate",
    "ColumnIntervals",
    "BOOTSTRAP_METHODS",
    "mean_ci",
    "mean_ci_columns",
    "t_ci",
    "wilson_ci",
    "exact_ci",
    "binary_ci",
    "BAND_METHODS",
    "RATE_BAND",
    "band_columns",
    "mean_band",
    # paired
    "PairedTest",
    "ADJUST_METHODS",
    "paired_diff_ci",
    "paired_t_test",
    "sign_flip_test",
    "mcnemar_exact",
    "wilcoxon_log_ratio",
    "adjust_pvalues",
    "sign_flip_min_p",
    "min_tasks_to_reject",
    "SMALL_SUITE_MARGIN",
    # power
    "ALPHA",
    "TARGET_POWER",
    "DEFAULT_ICC",
    "DEFAULT_METHOD_CORRELATION",
    "PassVarianceModel",
    "paired_power",
    "minimum_detectable_difference",
    "one_repeat_cells",
    "ternary_power",
    "ternary_mde",
    # variance
    "VarianceComponents",
    "variance_components",
    "fixed_suite_ci",
    # speedup
    "SpeedupSummary",
    "DEFAULT_FAST_PS",
    "geomean",
    "geomean_ci",
    "fast_p",
    "fast_p_table",
    "speedup_summary",
    # latency
    "LatencyStats",
    "latency_stats",
    "median_ci",
    "flagged_share",
    # false positives
    "visible_false_positive_rate",
    # curves
    "CurveBand",
    "PassAtKCurve",
    "submitted_curve",
    "oracle_curve",
    "task_mean_curves",
    "aggregate_curves",
    "curve_by_task",
    "runs_pass_at_k",
]
