"""scripts/judge_memory_probe.py's reading of torch's allocator trace, on a trace written here:
the replay needs no GPU (the probe's run does; tests/test_benchmarks_smoke.py checks that it says
so in one line)."""

from __future__ import annotations

from typing import Any

from tests.helpers import ROOT, script_module


def _probe() -> Any:
    return script_module("judge_memory_probe")


def test_the_memory_probe_finds_what_was_live_at_a_jobs_peak_by_allocating_line() -> None:
    """scripts/judge_memory_probe.py --history replays torch's allocator trace (no GPU needed
    for the replay): the peak, the blocks live then grouped by the innermost line of this
    project that allocated them, and what remained of the bytes held before the job."""
    probe = _probe()
    def frames(*where: tuple[str, int, str]) -> list[dict[str, object]]:
        return [{"filename": str(ROOT / path) if not path.startswith("/") else path, "line": line, "name": name}
                for path, line, name in where]

    torch_frame = ("/usr/lib/python3/site-packages/torch/functional.py", 10, "f")
    reference = frames(torch_frame, ("judge/comparison.py", 65, "expected_output"), ("judge/worker.py", 1, "handle"))
    prepare = frames(("judge/timing_job.py", 171, "_prepare"), ("judge/worker.py", 1, "handle"))
    trace = [{"action": "alloc", "addr": 1, "size": 50, "frames": reference},
             {"action": "alloc", "addr": 2, "size": 30, "frames": prepare},
             {"action": "free_requested", "addr": 1, "size": 50},
             {"action": "free_completed", "addr": 1, "size": 50},
             {"action": "free_completed", "addr": 9, "size": 40},  # a block from before the job
             {"action": "segment_alloc", "addr": 100, "size": 4096},
             {"action": "alloc", "addr": 3, "size": 200, "frames": reference},
             {"action": "alloc", "addr": 4, "size": 10, "frames": frames(torch_frame)},
             {"action": "free_completed", "addr": 3, "size": 200},
             {"action": "alloc", "addr": 5, "size": 20, "frames": []}]
    peak = probe.peak_parts(trace, before=100)
    assert peak.peak == 300 and peak.before == 100 and peak.entries == 8
    assert [(p.where, p.bytes, p.blocks) for p in peak.parts] == [
        ("judge/comparison.py:65 expected_output", 200, 1),
        ("held before the job (the input cache and earlier jobs' tensors)", 60, 0),
        ("judge/timing_job.py:171 _prepare", 30, 1),
        ("outside the project: /usr/lib/python3/site-packages/torch/functional.py:10 f", 10, 1)]
    assert probe.allocating_line([]) == "no stack recorded"
    # Nothing above what was held: no part but the held bytes, the peak is where the job began.
    quiet = probe.peak_parts([{"action": "free_completed", "addr": 9, "size": 40}], before=100)
    assert quiet.peak == 100 and [(p.bytes, p.blocks) for p in quiet.parts] == [(100, 0)]
    assert "peak allocated within the job" in probe.describe(peak)


def test_live_inputs_counts_drawn_tensors_alive_beyond_the_cache_and_names_their_holders() -> None:
    """`--live-inputs`: drawn inputs the input cache keeps are not counted; one held elsewhere
    (here a list) is, with its case and the type of what refers to it; a freed one is not."""
    from types import SimpleNamespace

    import torch

    probe = _probe()

    class FakeTask:
        def inputs(self, case: Any, device: str) -> tuple[torch.Tensor, ...]:
            return (torch.zeros(case.n, dtype=torch.uint8),)

    task = FakeTask()
    entries: dict[Any, Any] = {}
    watch = probe.LiveInputs(entries)
    watch.watch(task)
    entries["kept"] = task.inputs(SimpleNamespace(name="kept", n=1000), "cpu")
    held = [task.inputs(SimpleNamespace(name="held", n=300), "cpu")[0]]
    task.inputs(SimpleNamespace(name="freed", n=5000), "cpu")  # dropped at once
    assert watch.sample() == 300
    assert watch.worst["cases"] == ["held"] and "list" in watch.worst["referrers"][0]
    held.clear()
    assert watch.sample() == 0 and watch.worst["bytes"] == 300  # the worst sample stays
    with watch:
        pass
    assert "inputs" not in vars(task)  # unwrapped when the watch ends: the next job's watch starts clean
