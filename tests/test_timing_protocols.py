"""Cheap feedback timing, full final timing, reference timings once per run (issue 15 item 2).

On the CPU with fake timers: the interpreter's timings are not real, so the sides here are
objects that hand out chosen samples and count what was asked of them. What is pinned: the
short protocol's sequential rule stops early when the speedup's interval is decisive either
way (and around 1.0x), never samples past its cap; reference timings are measured once per
(device, task, case, clock state, launch mode) and re-used across candidates, re-checked for
drift after K uses or T seconds, and replaced when they moved; the full protocol is what it
was; the protocol of every timing reaches the store (old stores migrated), the report and
the export.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from judge.baselines import BaselineCache, BaselineKey, ReferenceTiming, clock_state
from judge.candidate.verdict import CaseTiming, Evaluation, Timing, Verdict
from judge.policy import FEEDBACK_SHORT, FINAL_FULL, TimingPolicy
from judge.timing import launch_mode, measure_references, recheck_references, time_case, time_case_short
from record.store import Store
from results.protocols import protocol_summary
from stats.sequential import (
    EQUIVALENT,
    FASTER,
    SLOWER,
    decide,
    intervals_overlap,
    look_confidence,
    median_interval,
    speedup_interval,
)

POLICY = TimingPolicy(protocol=FEEDBACK_SHORT)


class FakeSide:
    """A timed function whose samples are drawn around `ms` (relative noise `noise`), counting
    every sample and recording the launch mode it was prepared in."""

    def __init__(self, ms: float, noise: float = 0.002, seed: int = 0, graph_ok: bool = True,
                 log: list[str] | None = None, name: str = "") -> None:
        self.ms, self.noise, self.graph_ok = ms, noise, graph_ok
        self.rng = np.random.default_rng(seed)
        self.taken = 0  # samples taken
        self.batches: list[int] = []  # counts asked for in one message (`samples`)
        self.restored_after = -1  # how many samples had been taken when the inputs were last restored
        self.prepared: list[tuple[int, bool]] = []
        self.log, self.name = log, name

    def warm_up(self, warmup_ms: float, warmup_calls: int, allow_graphs: bool = True,
                estimate: bool = True) -> float:
        return self.ms if estimate else 0.0

    def prepare(self, launches: int, use_graph: bool) -> str:
        self.prepared.append((launches, use_graph))
        if use_graph and self.graph_ok:
            return "graph"
        return "loop" if launches > 1 else "events"

    def sample(self) -> float:
        self.taken += 1
        if self.log is not None:
            self.log.append(self.name)
        return float(self.ms * (1.0 + self.noise * self.rng.standard_normal()))

    def samples(self, count: int) -> list[float]:
        self.batches.append(count)
        return [self.sample() for _ in range(count)]

    def restore(self) -> None:
        self.restored_after = self.taken

    def wall(self) -> float:
        return self.ms


class References:
    """The callable `time_case_short` gets: a BaselineCache over fake reference sides, with a
    fake clock, counting full measurements and re-checks."""

    def __init__(self, baseline_ms: float = 10.0, cache: BaselineCache | None = None, case: str = "c0",
                 policy: TimingPolicy = POLICY) -> None:
        self.baseline_ms = baseline_ms
        self.now = 0.0
        self.cache = cache if cache is not None else BaselineCache(clock=lambda: self.now)
        self.case, self.policy = case, policy
        self.measured = 0
        self.modes: list[str] = []
        self.rechecked = 0
        self.seed = 100

    def sides(self) -> dict[str, Any]:
        self.seed += 1
        return {"baseline": FakeSide(self.baseline_ms, seed=self.seed), "eager": FakeSide(2 * self.baseline_ms,
                                                                                       seed=self.seed + 500)}

    def measure(self, mode: str) -> ReferenceTiming:
        self.measured += 1
        self.modes.append(mode)
        return measure_references(self.sides(), self.policy, None, True, mode)

    def recheck(self, cached: ReferenceTiming) -> ReferenceTiming:
        self.rechecked += 1
        return recheck_references(self.sides(), self.policy, cached)

    def __call__(self, state: str, mode: str) -> Any:
        key = BaselineKey("0", "task", self.case, state, mode)
        return self.cache.acquire(key, lambda: self.measure(mode), self.recheck, self.policy.baseline_recheck_uses,
                                  self.policy.baseline_recheck_seconds)


def _short(candidate: FakeSide, refs: References, policy: TimingPolicy = POLICY, case: str = "c0",
           clocks: dict[str, Any] | None = None) -> tuple[CaseTiming, list[Any]]:
    refs.case = case
    return time_case_short(candidate, case, policy, refs, (lambda: clocks) if clocks is not None else None)


# ---------------------------------------------------------------------------- the sequential rule
def test_the_rule_decides_each_way_and_waits_when_undecided() -> None:
    assert decide(1.05, 1.30, 0.05) == FASTER
    assert decide(0.50, 0.90, 0.05) == SLOWER
    assert decide(0.97, 1.03, 0.05) == EQUIVALENT
    assert decide(0.90, 1.10, 0.05) is None  # straddles 1.0 and the band: sample on
    assert look_confidence(0.05, 5, 20) == pytest.approx(1 - 0.05 / 16)
    with pytest.raises(ValueError):
        look_confidence(0.05, 6, 5)


def test_the_speedup_interval_is_the_ratio_of_medians_with_both_sides_uncertainty() -> None:
    rng = np.random.default_rng(0)
    base = 10.0 * (1 + 0.01 * rng.standard_normal(200))
    cand = 5.0 * (1 + 0.01 * rng.standard_normal(8))
    point, lo, hi = speedup_interval(base, cand, 0.95)
    assert point == pytest.approx(float(np.median(base) / np.median(cand)))
    assert lo < point < hi and lo > 1.9 and hi < 2.1
    _, lo_floor, hi_floor = speedup_interval(np.full(50, 10.0), np.full(5, 5.0), 0.95, noise_floor=0.01)
    assert lo_floor < 2.0 < hi_floor  # identical samples still get the floor's width, not zero
    assert speedup_interval([10.0], [5.0], 0.95)[1:] == (0.0, math.inf)  # one sample: no interval
    with pytest.raises(ValueError):
        speedup_interval([], [1.0], 0.95)
    assert intervals_overlap(median_interval([1.0, 1.01, 0.99], 0.95), (1.0, 1.0))
    assert not intervals_overlap((1.0, 2.0), (2.5, 3.0))


def test_the_short_protocols_reported_interval_keeps_the_noise_floor_over_cases() -> None:
    """The interval methods choose by: geometric mean of the cases' median ratios, each median's
    error at least the floor. Five near-identical samples per side do not make it vanish, as a
    bootstrap of their medians does (runs of one seed then chose differently on an H200)."""
    from scipy import stats as st

    from judge.timing import CaseTiming, speedup_with_ci
    from stats.sequential import geomean_speedup_interval

    cases = [(np.full(30, 10.0), np.array([5.0, 5.0001, 5.0, 4.9999, 5.0])),
             (np.full(30, 3.0), np.array([3.0, 3.0, 3.0001, 3.0, 2.9999]))]
    point, lo, hi = geomean_speedup_interval(cases, 0.95, noise_floor=0.005)
    assert point == pytest.approx(math.sqrt(2.0 * 1.0))
    se = math.sqrt(2 * 2 * 0.005 ** 2) / 2  # two cases, each the floor on both sides
    t = float(st.t.ppf(0.975, 4))
    assert (lo, hi) == pytest.approx((point * math.exp(-t * se), point * math.exp(t * se)))
    boot = speedup_with_ci([CaseTiming(case=f"c{i}", candidate_ms=tuple(c), baseline_ms=tuple(b))
                            for i, (b, c) in enumerate(cases)], TimingPolicy(seed=0), paired=False)[1]
    assert hi / lo > 1.01 > boot[1] / boot[0]  # the bootstrap's is a small fraction of a percent wide
    assert geomean_speedup_interval([([1.0, 1.0], [0.0, 0.0])], 0.95)[1:] == (0.0, math.inf)
    with pytest.raises(ValueError):
        geomean_speedup_interval([], 0.95)


def test_the_rule_rarely_decides_wrongly_when_candidate_and_baseline_are_the_same() -> None:
    """Bonferroni over looks: a candidate timed like its baseline, under noise, is called faster
    or slower at most about alpha of the time, although the rule looks up to 16 times."""
    wrong = 0
    runs = 200
    for seed in range(runs):
        cand = FakeSide(10.0, noise=0.02, seed=seed)
        refs = References()
        refs.seed = 10_000 + seed
        ct, _ = _short(cand, refs, replace(POLICY, feedback_equivalence=0.001))
        wrong += ct.decision in (FASTER, SLOWER)
    assert wrong / runs <= 0.05


# ---------------------------------------------------------------------------- the short protocol
@pytest.mark.parametrize(("candidate_ms", "decision"), [(5.0, FASTER), (20.0, SLOWER), (10.0, EQUIVALENT)])
def test_short_protocol_stops_early_when_decisive(candidate_ms: float, decision: str) -> None:
    cand = FakeSide(candidate_ms, noise=0.002, seed=1)
    ct, drift = _short(cand, References())
    assert ct.decision == decision and ct.early_stopped
    assert cand.taken == len(ct.candidate_ms) == POLICY.feedback_min_samples
    assert cand.batches == [POLICY.feedback_min_samples]  # the samples before the first look, in one message
    assert ct.baseline_source == "fresh" and drift == []
    assert len(ct.baseline_ms) >= POLICY.min_samples  # the references were measured by the full rule
    assert ct.eager_ms and ct.baseline_wall_ms == 10.0


def test_short_protocol_never_samples_past_its_cap() -> None:
    cand = FakeSide(10.4, noise=0.05, seed=2)  # 4% slower under 5% noise: no decision possible in 20
    ct, _ = _short(cand, References())
    assert cand.taken == len(ct.candidate_ms) == POLICY.feedback_max_samples
    assert cand.batches == [POLICY.feedback_min_samples]  # then one at a time, a look after each
    assert ct.decision is None and not ct.early_stopped
    capped = replace(POLICY, feedback_min_samples=3, feedback_max_samples=7)
    cand = FakeSide(10.4, noise=0.05, seed=3)
    assert len(_short(cand, References(), capped)[0].candidate_ms) == 7


def test_references_are_measured_once_and_reused_across_candidates_of_a_task() -> None:
    refs = References()
    first, _ = _short(FakeSide(5.0, seed=1), refs)
    second, _ = _short(FakeSide(20.0, seed=2), refs)
    third, _ = _short(FakeSide(9.0, seed=3), refs)
    assert refs.measured == 1 and refs.rechecked == 0
    assert [t.baseline_source for t in (first, second, third)] == ["fresh", "reused", "reused"]
    assert first.baseline_ms == second.baseline_ms == third.baseline_ms  # the very same measurement
    assert first.launches_per_sample == second.launches_per_sample


def test_references_are_measured_again_per_case_and_per_clock_state() -> None:
    cache = BaselineCache(clock=lambda: 0.0)
    refs = References(cache=cache)
    boost = {"available": True, "sm_mhz": 1980, "mem_mhz": 3201, "throttle": []}
    throttled = {"available": True, "sm_mhz": 1400, "mem_mhz": 3201, "throttle": ["sw_power_cap"]}
    assert _short(FakeSide(5.0), refs, case="c0", clocks=boost)[0].baseline_source == "fresh"
    assert _short(FakeSide(5.0), refs, case="c0", clocks=dict(boost, sm_mhz=1990))[0].baseline_source == "reused"
    assert _short(FakeSide(5.0), refs, case="c1", clocks=boost)[0].baseline_source == "fresh"  # another case
    assert _short(FakeSide(5.0), refs, case="c0", clocks=throttled)[0].baseline_source == "fresh"  # clocks moved
    assert refs.measured == 3 and len(cache) == 3
    assert clock_state(boost, False) != clock_state(boost, True)  # locked clocks are a state of their own
    assert clock_state(boost, True) != clock_state(dict(boost, sm_mhz=1500), True)  # ... per locked clock
    assert clock_state(dict(boost, sm_mhz=1965), False) == clock_state(boost, False)  # boost jitter: one state
    assert clock_state(dict(boost, throttle=["applications_clocks_setting"]), True) == clock_state(boost, True)
    assert clock_state({"available": False}, False) == "unknown"


def test_a_candidate_whose_graph_capture_fails_is_timed_against_plain_references() -> None:
    """One launch per sample on both sides: each sample's launch then runs on inputs refreshed
    for it (a plain loop of many launches on one set of inputs let a host-side memo, which
    cannot be captured, serve all but the first launch of every sample)."""
    refs = References(baseline_ms=0.005)  # a tiny kernel: the references are graph replays
    cand = FakeSide(0.005, seed=4, graph_ok=False)
    ct, _ = _short(cand, refs)
    assert ct.method == "events" and refs.measured == 2  # graph references, then plain ones for this candidate
    assert ct.launches_per_sample == 1
    graph_count = cand.prepared[0][0]
    assert graph_count > 1 and cand.prepared == [(graph_count, True), (1, False)]
    assert refs.modes == ["natural", "loop:1"]
    assert cand.restored_after == cand.taken  # the inputs' pristine values back once sampling ended


def test_the_full_protocol_falls_back_to_single_launches_on_every_side_when_one_capture_fails() -> None:
    sides = {"candidate": FakeSide(0.005, seed=1, graph_ok=False), "baseline": FakeSide(0.005, seed=2),
             "eager": FakeSide(0.01, seed=3)}
    ct, _, _ = time_case(sides, "c0", replace(POLICY, protocol=FINAL_FULL, min_samples=5, max_samples=5))
    assert ct.launches_per_sample == 1 and ct.method == "events"
    for side in sides.values():
        assert side.prepared[-1] == (1, False)
        assert side.taken == 5 and side.restored_after == 5


def test_a_small_candidate_against_slow_references_gets_graph_replayed_references() -> None:
    """As the full protocol would: a kernel under 20 us is timed as graph replays, and so are
    the references it is compared with, at its launch count."""
    refs = References(baseline_ms=0.05)  # 50 us: the references alone are timed launch by launch
    cand = FakeSide(0.005, seed=5)
    ct, _ = _short(cand, refs)
    assert refs.modes == ["natural", "graph:64"] and cand.prepared == [(64, True)]  # 50 launches, to a power of 2
    assert ct.method == "graph" and ct.launches_per_sample == 64
    again, _ = _short(FakeSide(0.005, seed=6), refs)
    assert again.baseline_source == "reused" and refs.measured == 2
    # A candidate whose warm-up says 4.2 us instead of 5 (60 launches) shares that count and
    # so the references measured for it: one baseline for every small kernel of the case.
    near, _ = _short(FakeSide(0.0042, seed=7), refs)
    assert near.launches_per_sample == 64 and near.baseline_source == "reused" and refs.measured == 2
    with pytest.raises(ValueError):
        launch_mode("warp:3")


def test_a_cached_reference_is_rechecked_after_k_uses_and_kept_when_it_did_not_move() -> None:
    refs = References(policy=replace(POLICY, baseline_recheck_uses=3))
    sources = [_short(FakeSide(5.0, seed=i), refs)[0].baseline_source for i in range(7)]
    assert sources == ["fresh", "reused", "reused", "reused", "reused", "reused", "reused"]
    assert refs.measured == 1 and refs.rechecked == 2  # at the 4th and the 7th use
    assert refs.cache.drift_events == 0


def test_a_cached_reference_is_rechecked_after_t_seconds() -> None:
    refs = References(policy=replace(POLICY, baseline_recheck_uses=1000, baseline_recheck_seconds=60.0))
    _short(FakeSide(5.0), refs)
    refs.now = 30.0
    _short(FakeSide(5.0), refs)
    assert refs.rechecked == 0
    refs.now = 61.0
    _short(FakeSide(5.0), refs)
    assert refs.rechecked == 1


def test_drift_triggers_a_fresh_measurement_that_replaces_the_cached_one_and_is_recorded() -> None:
    refs = References(policy=replace(POLICY, baseline_recheck_uses=2))
    first, _ = _short(FakeSide(5.0), refs)
    _short(FakeSide(5.0), refs)
    refs.baseline_ms = 13.0  # the GPU got slower: the baseline moved by 30%
    third, drift = _short(FakeSide(5.0), refs)
    assert refs.rechecked == 1 and refs.measured == 2
    assert third.baseline_source == "fresh" and len(drift) == 1
    event = drift[0]
    assert event.cached_ms == pytest.approx(10.0, rel=0.01)
    assert event.recheck_ms == pytest.approx(13.0, rel=0.01) and event.fresh_ms == pytest.approx(13.0, rel=0.01)
    assert float(np.median(third.baseline_ms)) == pytest.approx(13.0, rel=0.01)
    fourth, drift4 = _short(FakeSide(5.0), refs)
    assert fourth.baseline_ms == third.baseline_ms and fourth.baseline_source == "reused" and not drift4


# ---------------------------------------------------------------------------- the full protocol
def test_the_full_protocol_is_unchanged_interleaved_round_by_round() -> None:
    log: list[str] = []
    sides = {"candidate": FakeSide(5.0, noise=0.0, log=log, name="candidate"),
             "baseline": FakeSide(10.0, noise=0.0, log=log, name="baseline"),
             "eager": FakeSide(20.0, noise=0.0, log=log, name="eager")}
    policy = TimingPolicy()  # FINAL_FULL
    ct, _, _ = time_case(sides, "c0", policy)
    n = policy.min_samples  # noiseless samples are precise at once: the minimum, on every side
    assert len(ct.candidate_ms) == len(ct.baseline_ms) == len(ct.eager_ms) == n
    assert log[:6] == ["candidate", "baseline", "eager", "eager", "baseline", "candidate"]  # alternating order
    assert ct.baseline_source == "interleaved" and not ct.early_stopped and ct.decision is None
    noisy = {k: FakeSide(v, noise=0.2, seed=i) for i, (k, v) in enumerate({"candidate": 5.0, "baseline": 10.0}.items())}
    ct2, _, _ = time_case(noisy, "c0", replace(policy, max_samples=60, max_seconds_per_case=60))
    assert len(ct2.candidate_ms) == len(ct2.baseline_ms) == 60  # 20% noise never reaches 1%: the cap
    # The short protocol's settings do not touch the full one.
    short_settings = replace(policy, feedback_min_samples=2, feedback_max_samples=3, baseline_recheck_uses=1)
    sides_again = {k: FakeSide(s.ms, noise=0.0) for k, s in sides.items()}
    assert len(time_case(sides_again, "c0", short_settings)[0].candidate_ms) == n


def test_the_policy_names_its_protocol_and_refuses_bad_settings() -> None:
    assert TimingPolicy().protocol == FINAL_FULL
    assert TimingPolicy().for_protocol(FEEDBACK_SHORT).protocol == FEEDBACK_SHORT
    with pytest.raises(ValueError, match="unknown timing protocol"):
        TimingPolicy(protocol="quick")
    with pytest.raises(ValueError):
        TimingPolicy(feedback_min_samples=10, feedback_max_samples=5)
    with pytest.raises(ValueError):
        TimingPolicy.from_json({"feedback_alpha": 1.5})
    assert TimingPolicy.from_json(POLICY.to_json()) == POLICY


def test_the_evaluator_asks_for_the_protocol_it_is_told() -> None:
    from judge.device import Target
    from runners.evaluator import Evaluator

    asked: list[str] = []

    class Executor:
        size = 1

        def evaluate(self, task_id: str, source: str, case_set: str, timing: bool = False,
                     timing_policy: TimingPolicy | None = None, timeout: float | None = None, compile_through: str = "") -> Evaluation:
            assert timing_policy is not None
            asked.append(timing_policy.protocol)
            return Evaluation(Verdict("correct"))

    class Memory:
        def __init__(self) -> None:
            self.rows: dict[tuple, dict] = {}

        def put_source(self, source: str) -> str:
            return source

        def evaluation(self, h: str, task: str, case_set: str, device_key: str, timed: bool = False) -> Any:
            return self.rows.get((h, task, case_set, device_key, timed))

        def record_evaluation(self, h: str, task: str, case_set: str, device_key: str, evaluation: dict,
                              timed: bool = False, phases: Any = None) -> None:
            self.rows[(h, task, case_set, device_key, timed)] = evaluation

    gpu = Target(vendor="nvidia", interpreter=False, device_name="H200", device_count=1)
    evaluator = Evaluator(Executor(), Memory(), gpu)  # type: ignore[arg-type]
    evaluator.evaluate("vector_add", "code", "visible", timing=True, protocol=FEEDBACK_SHORT)
    evaluator.evaluate("vector_add", "code", "hidden", timing=True)
    assert asked == [FEEDBACK_SHORT, FINAL_FULL]


# ---------------------------------------------------------------------------- records, store, report, export
def _timing(protocol: str, sources: tuple[str, ...], early: tuple[bool, ...], drift: int = 0) -> Timing:
    cases = tuple(CaseTiming(case=f"c{i}", candidate_ms=(1.0,) * (5 if e else 20), baseline_ms=(2.0,) * 30,
                             baseline_source=s, early_stopped=e, decision=FASTER if e else None)
                  for i, (s, e) in enumerate(zip(sources, early, strict=True)))
    events = tuple({"case": "c0", "clock_state": "unknown", "cached_ms": 2.0, "recheck_ms": 2.5, "fresh_ms": 2.5,
                    "uses": 8, "age_s": 1.0} for _ in range(drift))
    return Timing(cases=cases, speedup_vs_baseline=2.0, speedup_ci=(1.9, 2.1), protocol=protocol, drift_events=events)


def test_the_timing_record_round_trips_its_protocol() -> None:
    t = _timing(FEEDBACK_SHORT, ("fresh", "reused"), (True, False), drift=1)
    back = Timing.from_json(json.loads(json.dumps(t.to_json())))
    assert back == t and back is not None and back.samples_taken == 25
    old = t.to_json()
    old.pop("protocol")
    old.pop("drift_events")
    for c in old["cases"]:
        for k in ("baseline_source", "early_stopped", "decision"):
            c.pop(k)
    legacy = Timing.from_json(old)  # a record written before the protocol existed
    assert legacy is not None and legacy.protocol == FINAL_FULL and legacy.drift_events == ()
    assert {c.baseline_source for c in legacy.cases} == {"interleaved"}


def test_the_store_records_the_protocol_and_migrates_an_old_store(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    db = sqlite3.connect(path)  # evaluations as stores wrote them before the protocol columns
    db.execute("CREATE TABLE evaluations (source_hash TEXT NOT NULL, task TEXT NOT NULL, case_set TEXT NOT NULL, "
               "device_key TEXT NOT NULL, timed INTEGER NOT NULL DEFAULT 0, verdict TEXT NOT NULL, "
               "evaluation TEXT NOT NULL, created REAL NOT NULL, queue_s REAL, compile_s REAL, correctness_s REAL, "
               "timing_s REAL, PRIMARY KEY (source_hash, task, case_set, device_key, timed))")
    legacy = Evaluation(Verdict("correct"), _timing(FINAL_FULL, ("interleaved",) * 2, (False, False))).to_json()
    legacy["timing"].pop("protocol")
    db.execute("INSERT INTO evaluations VALUES ('old', 't', 'hidden', 'gpu', 1, 'correct', ?, 0, 1, 1, 1, 9)",
               (json.dumps(legacy),))
    db.execute("INSERT INTO evaluations VALUES ('untimed', 't', 'hidden', 'gpu', 0, 'correct', ?, 0, 1, 1, 1, NULL)",
               (json.dumps(Evaluation(Verdict("correct")).to_json()),))
    db.execute("INSERT INTO evaluations VALUES ('failed', 't', 'hidden', 'gpu', 1, 'wrong_result', ?, 0, 1, 1, 1, "
               "NULL)", (json.dumps(Evaluation(Verdict("wrong_result")).to_json()),))
    db.commit()
    db.close()
    store = Store(path)
    short = Evaluation(Verdict("correct"), _timing(FEEDBACK_SHORT, ("fresh", "reused", "reused"),
                                                   (True, True, False), drift=1)).to_json()
    store.record_evaluation("new", "t", "visible", "gpu", short, timed=True, phases={"timing": 0.5})
    rows = {r["source_hash"]: r for r in store.evaluations()}
    assert [rows["old"][c] for c in ("protocol", "samples", "early_stopped", "baselines_reused", "drift_events")] == \
        [FINAL_FULL, 40, 0, 0, 0]
    assert [rows["new"][c] for c in ("protocol", "samples", "early_stopped", "baselines_reused", "drift_events")] == \
        [FEEDBACK_SHORT, 30, 2, 2, 1]
    assert rows["untimed"]["protocol"] is None and rows["untimed"]["samples"] is None
    assert rows["failed"]["protocol"] is None  # asked to be timed, but wrong: no timing, no protocol
    store.close()
    Store(path).close()  # opening again changes nothing


def test_the_protocol_summary_splits_shared_timings_between_methods() -> None:
    ev = pd.DataFrame([
        {"source_hash": "a", "task": "t", "case_set": "visible", "device_key": "d", "timed": True,
         "protocol": FEEDBACK_SHORT, "samples": 10, "early_stopped": 2, "baselines_reused": 1, "drift_events": 0,
         "timing_s": 1.0},
        {"source_hash": "a", "task": "t", "case_set": "hidden", "device_key": "d", "timed": True,
         "protocol": FINAL_FULL, "samples": 60, "early_stopped": 0, "baselines_reused": 0, "drift_events": 0,
         "timing_s": 6.0},
        {"source_hash": "b", "task": "t", "case_set": "visible", "device_key": "d", "timed": True,
         "protocol": FEEDBACK_SHORT, "samples": 40, "early_stopped": 0, "baselines_reused": 2, "drift_events": 1,
         "timing_s": None},  # replayed: no seconds
        {"source_hash": "b", "task": "t", "case_set": "hidden", "device_key": "d", "timed": False,
         "protocol": None, "samples": None, "early_stopped": None, "baselines_reused": None, "drift_events": None,
         "timing_s": None},
    ])
    candidates = pd.DataFrame([{"method": "direct", "task": "t", "source_hash": "a"},
                               {"method": "geak", "task": "t", "source_hash": "a"},
                               {"method": "geak", "task": "t", "source_hash": "b"}])
    out = protocol_summary(ev, candidates).set_index(["method", "protocol"])
    direct = out.loc[("direct", FEEDBACK_SHORT)]
    assert (direct["timings"], direct["samples_per_timing"], direct["early_stopped"]) == (0.5, 10.0, 1.0)
    assert direct["timing_s_per_timing"] == pytest.approx(1.0)
    geak = out.loc[("geak", FEEDBACK_SHORT)]
    assert (geak["timings"], geak["samples_per_timing"], geak["baselines_reused"], geak["drift_events"]) == \
        (1.5, 30.0, 2.5, 1.0)
    assert geak["timing_s_per_timing"] == pytest.approx(1.0)  # only the timing with seconds counts
    assert out.loc[("geak", FINAL_FULL)]["samples_per_timing"] == 60.0
    assert protocol_summary(ev.iloc[3:], candidates).empty


def test_the_report_and_export_show_the_protocol_of_a_real_gpu_run(tmp_path: Path) -> None:
    """The shipped H200 run (as re-recorded) timed its visible feedback with the short
    protocol and its final submissions with the full one: the report's table and the export
    show both, each where it belongs."""
    from results.analysis import analyse
    from results.export import candidate_table, unit_table
    from results.readers import load_run
    from results.tables import build_tables, to_markdown
    from tests.test_figures_all import shipped_copy

    run = shipped_copy(tmp_path)
    store = Store(run / "store.sqlite")
    timed = [r for r in store.evaluations() if r["protocol"] is not None]
    store.close()
    assert timed and {r["protocol"] for r in timed} == {FINAL_FULL, FEEDBACK_SHORT}
    assert {r["protocol"] for r in timed if r["case_set"] == "visible"} == {FEEDBACK_SHORT}
    assert {r["protocol"] for r in timed if r["case_set"] == "hidden"} == {FINAL_FULL}
    data = load_run(run)
    tables = {t.name: t for t in build_tables(analyse(data, n_resamples=200))}
    table = tables["timing_protocols"]
    assert set(table.numeric["protocol"]) == {FINAL_FULL, FEEDBACK_SHORT}
    short = table.numeric[table.numeric["protocol"] == FEEDBACK_SHORT]
    full = table.numeric[table.numeric["protocol"] == FINAL_FULL]
    assert short["samples_per_timing"].max() < full["samples_per_timing"].min()  # the short protocol is short
    assert (short["early_stopped"] > 0).all() and (full["early_stopped"] == 0).all()
    assert "feedback-short" in to_markdown(table) and "final-full" in to_markdown(table)
    candidates = candidate_table(data)
    shown = candidates[candidates["visible_timing_protocol"].notna()]
    assert len(shown) and set(shown["visible_timing_protocol"]) == {FEEDBACK_SHORT}
    units = unit_table(data)
    assert set(units["timing_protocol"].dropna()) == {FINAL_FULL} and (units["timing_samples"].dropna() >= 30).all()


def test_graph_launch_counts_are_powers_of_two_enough_for_the_target() -> None:
    from judge.candidate.sampling import GRAPH_TARGET_MS, MAX_GRAPH_LAUNCHES, graph_launches

    for est in (0.0001, 0.0013, 0.004, 0.005, 0.0125, 0.019, 0.3, 5.0):
        n = graph_launches(est)
        assert n & (n - 1) == 0, n
        assert n == MAX_GRAPH_LAUNCHES or n * est >= GRAPH_TARGET_MS
        assert n == 1 or (n // 2) * est < GRAPH_TARGET_MS  # the smallest such power


def test_two_workers_time_against_the_runs_one_measurement_of_the_references() -> None:
    """What the pool does between two workers' caches (runners/references.py): the first worker's
    measurement travels as JSON and the second adopts it instead of measuring its own, so a
    candidate's speedup does not depend on which worker judged it."""
    from judge.baselines import Shared
    from runners.references import RunReferences

    run = RunReferences()
    first, second = References(), References()
    a, _ = _short(FakeSide(5.0, seed=1), first)
    assert run.keep([s.to_json() for s in first.cache.take_new()]) == 1
    assert first.cache.take_new() == []  # reported once
    assert second.cache.adopt([Shared.from_json(d) for d in run.of("task")]) == 1
    b, _ = _short(FakeSide(5.0, seed=2), second)
    assert second.measured == 0 and b.baseline_source == "reused" and b.baseline_ms == a.baseline_ms
    assert second.cache.take_new() == []  # nothing of its own to report
    assert run.of("another task") == [] and len(run) == 1


def test_a_worker_follows_the_runs_fresh_measurement_after_drift() -> None:
    from judge.baselines import Shared

    mine, theirs = References(), References(baseline_ms=12.0)
    _short(FakeSide(5.0, seed=1), mine)
    _short(FakeSide(5.0, seed=2), theirs)  # another worker's later measurement of the same key
    newer = theirs.cache.take_new()
    assert mine.cache.adopt(newer) == 1  # another measurement than its own: replaced
    assert mine.cache.adopt(newer) == 0  # the same one again: nothing to do
    ct, _ = _short(FakeSide(5.0, seed=3), mine)
    assert ct.baseline_ms == newer[0].timing.baseline_ms and mine.measured == 1
    assert Shared.from_json(newer[0].to_json()) == newer[0]


def test_a_tasks_first_timed_job_goes_first_and_the_rest_wait_for_it() -> None:
    """`first_of`: the first job of a task is told to prime the references; the others wait
    until it has returned, then run side by side (none of them primes)."""
    import threading
    import time

    from runners.references import RunReferences

    run = RunReferences()
    events: list[str] = []
    together = threading.Barrier(3, timeout=5)

    def first() -> None:
        with run.first_of("task") as primes:
            events.append(f"first primes={primes}")
            time.sleep(0.3)
            events.append("first done")

    def later() -> None:
        with run.first_of("task") as primes:
            events.append(f"later primes={primes}")
            together.wait()  # all three later jobs inside at once: nothing serialises them

    leader = threading.Thread(target=first)
    leader.start()
    time.sleep(0.05)
    rest = [threading.Thread(target=later) for _ in range(3)]
    for t in rest:
        t.start()
    for t in [leader, *rest]:
        t.join(10)
    assert events[:2] == ["first primes=True", "first done"] and events[2:] == ["later primes=False"] * 3
    assert not together.broken
    with run.first_of("other task") as primes:
        assert primes  # per task


def test_primed_references_are_what_the_next_feedback_timing_uses() -> None:
    """`BaselineCache.put` (the first job of a task priming the references, whatever its
    verdict): kept where the key has none, never over a measurement already there, and the
    next candidate's short timing reuses it instead of measuring."""
    refs = References()
    primed = refs.measure("natural")
    key = BaselineKey("0", "task", "c0", "unknown", "natural")  # no clocks here: the "unknown" state
    assert refs.cache.put(key, primed) and not refs.cache.put(key, refs.measure("natural"))
    ct, _ = _short(FakeSide(5.0, seed=1), refs)
    assert ct.baseline_source == "reused" and ct.baseline_ms == primed.baseline_ms
    assert [s.key for s in refs.cache.take_new()] == [key]  # the pool is told of the primed measurement


def test_a_sample_keeps_the_gpu_busy_from_the_flush_to_the_timed_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order one sample enqueues (judge/candidate/sampling.py `hold_gpu`): flush, the spin, then the
    start event, the launches and the end event, so the host's time to launch is not timed."""
    import torch

    from judge.candidate import sampling

    order: list[str] = []

    class Recorded:
        def __init__(self, name: str) -> None:
            self.name = name

        def zero_(self) -> None:
            order.append("flush")

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            pass

        def record(self) -> None:
            order.append("event")

        def elapsed_time(self, other: Any) -> float:
            return 3.0

    class Launches:
        launches = 3

        def __call__(self) -> None:
            order.append("launches")

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: order.append("sync"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: order.append(f"spin {cycles}"), raising=False)
    side = sampling.Side(lambda: None)
    side.flush, side.runner = Recorded("flush"), Launches()  # type: ignore[assignment]
    assert side.sample() == 1.0
    assert order == ["flush", f"spin {sampling.HOLD_CYCLES}", "event", "launches", "event", "sync"]
    monkeypatch.delattr(torch.cuda, "_sleep")
    order.clear()
    assert side.sample() == 1.0 and order == ["flush", "event", "launches", "event", "sync"]  # no spin: the flush alone


class _PerfTask:
    """A task of perf cases c0 and c1, inputs of 16 float32 elements each."""

    id, seeded_rng, triton_reference = "fake-grouped-timing", False, False

    def output_args(self, case: Any) -> Any:
        from bench.task import OutputArgs

        return OutputArgs()

    def inputs(self, case: Any, device: str) -> tuple:
        import torch

        return (torch.ones(16),)

    def judged_output(self, out: Any, inputs: Any, case: Any) -> Any:
        return out

    def reference(self, x: Any) -> Any:
        return x + 1

    def tolerance(self, dtype: str) -> Any:
        from bench.task import Tolerance

        return Tolerance(1e-5, 1e-5)


def test_timing_takes_inputs_and_expected_outputs_from_the_judges_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """`time_candidate` (judge/timing_job.py): each case's inputs and expected output come
    from the worker's cache (drawn once, by the perf-case check or the first timing), never
    drawn again per timing; a case the task cannot build is left out, and with none left the
    timing says so (`CaseUnavailable`) instead of failing on an empty set."""
    import torch

    from bench.task import CaseUnavailable
    from judge import case_inputs, comparison, timing_job

    drawn: list[str] = []
    answered: list[str] = []

    class FakeTask(_PerfTask):
        id = "fake-timing-cache"

        def inputs(self, case: Any, device: str) -> tuple:
            if case.name == "gone":
                raise CaseUnavailable("gone: not here")
            drawn.append(case.name)
            return (torch.ones(4),)

    def expected(task: Any, args: tuple, case: Any) -> tuple[Any, Any]:
        answered.append(case.name)
        return args[0] + 1, None

    def measure(side: Any, name: str, *args: Any, **kwargs: Any) -> tuple[CaseTiming, list[Any]]:
        return CaseTiming(case=name, candidate_ms=(1.0, 1.0), baseline_ms=(2.0, 2.0), eager_ms=(2.0, 2.0)), []

    monkeypatch.setattr(case_inputs, "expected_and_unwritten", expected)
    monkeypatch.setattr(comparison, "to_device", lambda out, device: out)
    monkeypatch.setattr(case_inputs, "_CACHE", case_inputs._InputCache(1 << 20))
    monkeypatch.setattr(timing_job, "warm_up", lambda *a, **k: 1.0)
    monkeypatch.setattr(timing_job, "sample_short", measure)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    cases = tuple(type("C", (), {"name": n, "seed": 0})() for n in ("c0", "gone", "c1"))
    for _ in range(2):
        result = timing_job.time_candidate(FakeTask(), lambda x: x + 1, lambda x: x + 1, cases, "none", 0,  # type: ignore[arg-type]
                                           POLICY, BaselineCache())
        assert result.speedup_vs_baseline == pytest.approx(2.0)
        assert [ct.case for ct in result.cases] == ["c0", "c1"]
    assert drawn == ["c0", "c1"] and answered == ["c0", "c1"]  # once each, over both timings
    with pytest.raises(CaseUnavailable, match="no perf case can be timed: gone: not here"):
        timing_job.time_candidate(FakeTask(), lambda x: x, lambda x: x, cases[1:2], "none", 0, POLICY)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- how the gate is held
class HoldLog:
    """`Holds` that log which hold is in force when each side's step runs."""

    def __init__(self) -> None:
        self.current = "none"
        self.entered: list[str] = []

    def hold(self, kind: str) -> Any:
        import contextlib

        @contextlib.contextmanager
        def held() -> Any:
            assert self.current == "none", "holds never nest"
            self.current = kind
            self.entered.append(kind)
            try:
                yield
            finally:
                self.current = "none"

        return held


class LoggedSide(FakeSide):
    def __init__(self, holds: HoldLog, steps: list[tuple[str, str]], ms: float, seed: int = 0) -> None:
        super().__init__(ms, seed=seed)
        self.holds, self.steps = holds, steps

    def warm_up(self, warmup_ms: float, warmup_calls: int, allow_graphs: bool = True,
                estimate: bool = True) -> float:
        self.steps.append(("warm_up", self.holds.current))
        return super().warm_up(warmup_ms, warmup_calls, allow_graphs, estimate)

    def prepare(self, launches: int, use_graph: bool) -> str:
        self.steps.append(("prepare", self.holds.current))
        return super().prepare(launches, use_graph)

    def sample(self) -> float:
        self.steps.append(("sample", self.holds.current))
        return super().sample()


def test_the_full_protocol_measures_alone_and_warms_up_beside_other_judging() -> None:
    from judge.timing import Holds, time_case

    log, steps = HoldLog(), []
    sides = {name: LoggedSide(log, steps, ms, seed=i) for i, (name, ms) in
             enumerate((("candidate", 1.0), ("baseline", 1.2), ("eager", 2.0)))}
    time_case(sides, "c0", TimingPolicy(), holds=Holds(shared=log.hold("shared"), alone=log.hold("alone")))
    assert {hold for step, hold in steps if step in ("warm_up", "prepare")} == {"shared"}
    assert {hold for step, hold in steps if step == "sample"} == {"alone"}
    assert log.entered == ["shared", "alone"]


def test_the_short_protocol_measures_its_references_and_samples_alone() -> None:
    from judge.timing import Holds

    log, steps = HoldLog(), []
    refs = References()
    measured_under: list[str] = []
    original = refs.measure

    def measure(mode: str) -> Any:
        measured_under.append(log.current)
        return original(mode)

    refs.measure = measure  # type: ignore[method-assign]
    candidate = LoggedSide(log, steps, 5.0)
    time_case_short(candidate, "c0", POLICY, refs, holds=Holds(shared=log.hold("shared"), alone=log.hold("alone")))
    assert steps[0] == ("warm_up", "shared")
    assert {hold for step, hold in steps[1:]} == {"alone"} and measured_under == ["alone"]


# ---------------------------------------------------------------------------- warm-up until the clocks are up
class WarmLog(FakeSide):
    """A side that logs each warm-up request: (milliseconds, calls, whether it estimates)."""

    def __init__(self, ms: float = 1.0) -> None:
        super().__init__(ms)
        self.warm: list[tuple[float, int, bool]] = []

    def warm_up(self, warmup_ms: float, warmup_calls: int, allow_graphs: bool = True,
                estimate: bool = True) -> float:
        self.warm.append((warmup_ms, warmup_calls, estimate))
        return super().warm_up(warmup_ms, warmup_calls, allow_graphs, estimate)


def _readings(*sm: int | None) -> Any:
    """Clock readings of an SM clock whose maximum is 2000 MHz, one per call (the last repeats);
    None: a reading without clock data."""
    left = list(sm)

    def read() -> dict[str, Any]:
        mhz = left.pop(0) if len(left) > 1 else left[0]
        return {"available": False} if mhz is None else {"available": True, "sm_mhz": mhz, "max_sm_mhz": 2000}

    return read


def test_the_warm_up_ends_once_the_clocks_are_up() -> None:
    from judge.timing import WARMUP_SLICE_MS, warm_up

    policy = TimingPolicy()
    side = WarmLog()
    assert warm_up(side, policy, True, _readings(600, 1500, 1900)) == 1.0
    floor = (policy.warmup_floor_ms, policy.warmup_calls, False)
    assert side.warm == [floor, (WARMUP_SLICE_MS, 0, False), (WARMUP_SLICE_MS, 0, False), (0.0, 0, True)]
    hot = WarmLog()
    warm_up(hot, policy, True, _readings(1990))  # a GPU busy with other judging is at its clocks already
    assert hot.warm == [floor, (0.0, 0, True)]


def test_the_warm_up_never_passes_its_cap_and_runs_it_all_where_the_clocks_cannot_tell() -> None:
    from judge.timing import warm_up

    policy = TimingPolicy()
    cold = WarmLog()
    warm_up(cold, policy, True, _readings(400))  # never up (a power-capped board): the whole cap, then stop
    assert sum(ms for ms, _, _ in cold.warm) == pytest.approx(policy.warmup_ms)
    assert cold.warm[-1] == (0.0, 0, True) and [e for _, _, e in cold.warm].count(True) == 1
    blind = WarmLog()
    warm_up(blind, policy, True, _readings(None))  # no clock data: the rest of the cap in one request
    assert blind.warm == [(policy.warmup_floor_ms, policy.warmup_calls, False),
                          (policy.warmup_ms - policy.warmup_floor_ms, 0, False), (0.0, 0, True)]
    plain = WarmLog()
    warm_up(plain, policy, True, None)  # no clock reader at all: the fixed warm-up of old
    assert plain.warm == [(policy.warmup_ms, policy.warmup_calls, True)]


def test_locked_clocks_are_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge.clocks import CLOCKS_LOCKED_ENV, clocks_up

    reading = {"available": True, "sm_mhz": 1410, "max_sm_mhz": 1980}
    assert clocks_up(reading) is False
    assert clocks_up({**reading, "sm_mhz": 1980}) is True
    assert clocks_up({"available": True, "sm_mhz": 1980}) is None  # no maximum: cannot tell
    monkeypatch.setenv(CLOCKS_LOCKED_ENV, "1")
    assert clocks_up(reading) is True  # --lock-clocks holds them where the user put them


def test_the_full_protocol_brings_the_clocks_up_once_for_all_sides() -> None:
    from judge.timing import time_case

    sides = {name: WarmLog(ms) for name, ms in (("candidate", 1.0), ("baseline", 1.2), ("eager", 2.0))}
    time_case(sides, "c0", TimingPolicy(), _readings(500, 900, 1950))
    assert len(sides["candidate"].warm) == 4  # floor, two slices, the estimate
    assert len(sides["baseline"].warm) == len(sides["eager"].warm) == 2  # floor and estimate: the clocks were up


def test_the_candidate_process_warms_in_slices_and_sends_the_first_looks_samples_in_one_reply() -> None:
    """RemoteSide's requests, answered by the candidate process's own step handler
    (`CandidateTimer.step`) over a side that needs no GPU: the inputs go with the first warm-up
    only, later slices only warm, and `samples` asks for several in one message."""
    import torch

    from judge.candidate.sampling import CandidateTimer
    from judge.timing import RemoteSide

    class Process:
        def __init__(self) -> None:
            self.headers: list[dict[str, Any]] = []
            self.timer: CandidateTimer | None = None

        def request(self, header: dict[str, Any], tensors: Any = None) -> tuple[dict[str, Any], list]:
            self.headers.append(header)
            if header["step"] == "start":
                self.timer = CandidateTimer(lambda x: x, (torch.zeros(2),), None)
                self.timer.side = FakeSide(0.5)  # type: ignore[assignment]
            assert self.timer is not None
            try:
                reply, out = self.timer.step(header)
            except ValueError as exc:
                return {"ok": False, "message": str(exc)}, []
            return {"ok": True, **reply}, out

    proc = Process()
    side = RemoteSide(proc, (torch.zeros(2),))
    assert side.warm_up(5.0, 3, estimate=False) == 0.0
    assert side.warm_up(0.0, 0) == 0.5
    assert [h["step"] for h in proc.headers] == ["start", "warm"] and "args" not in proc.headers[1]
    assert side.samples(5) == pytest.approx([0.5] * 5, rel=0.05) and side.sample() == pytest.approx(0.5, rel=0.05)
    assert proc.headers[-2]["count"] == 5 and "count" not in proc.headers[-1]
    with pytest.raises(RuntimeError, match="samples asked for"):
        side.samples(10_000)


def test_the_candidate_process_keeps_one_timer_per_perf_case_prepared(monkeypatch: pytest.MonkeyPatch) -> None:
    """judge/candidate/server.py `_op_time`: RemoteSides of two perf cases (timers 0 and 1) warm
    up before either samples, each step reaches its own case's timer, and `close` lets one go."""
    import torch

    from judge.candidate import sampling
    from judge.candidate.server import CandidateServer
    from judge.timing import RemoteSide

    class Timer(sampling.CandidateTimer):
        def __init__(self, entry: Any, args: tuple, refresh: Any) -> None:
            super().__init__(entry, args, refresh)
            self.side = FakeSide(float(args[0].numel()))  # type: ignore[assignment]  # 2 or 3 ms: which case

    monkeypatch.setattr(sampling, "CandidateTimer", Timer)
    server = object.__new__(CandidateServer)
    server.entry, server.module, server.timers = (lambda x: x), None, {}

    class Process:
        def request(self, header: dict[str, Any], tensors: Any = None) -> tuple[dict[str, Any], list]:
            return server._op_time(header, list(tensors or []))

    proc = Process()
    first, second = RemoteSide(proc, (torch.zeros(2),), timer=0), RemoteSide(proc, (torch.zeros(3),), timer=1)
    assert first.warm_up(1.0, 1) == 2.0 and second.warm_up(1.0, 1) == 3.0
    assert set(server.timers) == {0, 1}
    assert first.sample() == pytest.approx(2.0, rel=0.05) and second.sample() == pytest.approx(3.0, rel=0.05)
    first.close()
    assert set(server.timers) == {1} and second.samples(2) == pytest.approx([3.0, 3.0], rel=0.05)


# ---------------------------------------------------------------------------- a job's cases under one exclusive ticket
@pytest.mark.parametrize("hold, group_bytes, protocol, grouped", [
    ("samples", None, FEEDBACK_SHORT, True), ("case", None, FEEDBACK_SHORT, False), ("samples", 64, FEEDBACK_SHORT, False),
    ("samples", None, FINAL_FULL, False)])
def test_a_timed_jobs_cases_are_prepared_then_measured_under_one_exclusive_ticket(
        monkeypatch: pytest.MonkeyPatch, hold: str, group_bytes: int | None, protocol: str, grouped: bool) -> None:
    """judge/timing_job.py: every perf case prepared (inputs, warm-up) under shared tickets, then
    all sampled under one exclusive ticket, then each output checked under a shared one; with
    `KMC_TIMING_HOLD=case`, or cases whose inputs reach `GROUP_BYTES` each (64 bytes against
    64), each case is measured under its own, as before; and always in the full protocol, whose
    preparation captures graphs (judge/timing_job.py says why)."""
    import torch

    from judge import case_inputs, comparison, timing_job
    from judge.timing import Holds

    log, events = HoldLog(), []

    def warm(side: Any, *args: Any, **kwargs: Any) -> float:
        events.append(("warm_up", log.current))
        return 1.0

    def sample(side: Any, name: str, *args: Any, **kwargs: Any) -> tuple[CaseTiming, list[Any]]:
        events.append((f"sample {name}", log.current))
        return CaseTiming(case=name, candidate_ms=(1.0, 1.0), baseline_ms=(2.0, 2.0), eager_ms=(2.0, 2.0)), []

    def checked(task: Any, prepared: Any, candidate: Any) -> None:
        events.append((f"check {prepared.case.name}", log.current))

    monkeypatch.setenv(timing_job.TIMING_HOLD_ENV, hold)
    if group_bytes is not None:
        monkeypatch.setattr(timing_job, "GROUP_BYTES", group_bytes)
    monkeypatch.setattr(timing_job, "warm_up", warm)
    monkeypatch.setattr(timing_job, "sample_short", sample)
    monkeypatch.setattr(timing_job, "prepare_case", lambda sides, *a, **k: warm(sides) and (1, {}))
    monkeypatch.setattr(timing_job, "sample_case", lambda sides, name, *a, **k: sample(sides, name)[0])
    monkeypatch.setattr(timing_job, "_check_after", checked)
    monkeypatch.setattr(case_inputs, "expected_and_unwritten", lambda task, args, case: (args[0] + 1, None))
    monkeypatch.setattr(comparison, "to_device", lambda out, device: out)
    monkeypatch.setattr(case_inputs, "_CACHE", case_inputs._InputCache(1 << 20))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    cases = tuple(type("C", (), {"name": n, "seed": 0})() for n in ("c0", "c1"))
    result = timing_job.time_candidate(_PerfTask(), lambda x: x + 1, lambda x: x + 1, cases, "none", 0,  # type: ignore[arg-type]
                                       replace(POLICY, protocol=protocol), BaselineCache(),
                                       Holds(shared=log.hold("shared"), alone=log.hold("alone")))
    assert [ct.case for ct in result.cases] == ["c0", "c1"] and result.speedup_vs_baseline == pytest.approx(2.0)
    if grouped:
        assert events == [("warm_up", "shared"), ("warm_up", "shared"), ("sample c0", "alone"), ("sample c1", "alone"),
                          ("check c0", "shared"), ("check c1", "shared")]
    else:
        assert events == [("warm_up", "shared"), ("sample c0", "alone"), ("check c0", "shared"),
                          ("warm_up", "shared"), ("sample c1", "alone"), ("check c1", "shared")]
    assert log.entered.count("alone") == (1 if grouped else 2)
