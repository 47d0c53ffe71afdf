#!/usr/bin/env python
"""Issue 12 on this machine (an H200 for the closing note; the CPU interpreter works too):
the hostile corpus through one pool, the same-worker chain, and the evaluator throughput,
pool vs the naive subprocess harness with verdict agreement. Prints each and writes JSON.

Usage: python scripts/judge_check.py [--n 200] [--workers W] [--json runs/judge-check.json] [--skip-throughput]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judge.device import detect_target  # noqa: E402
from runners.pool import LocalPool  # noqa: E402
from tests.test_hostile import ACTIVE, CHAIN, HANG_TIMEOUT_S, HOSTILE, JOB_TIMEOUT_S  # noqa: E402


def corpus(target: Any) -> tuple[list[dict[str, Any]], str]:
    """Each corpus entry's verdict against the one it must get, and the containment line."""
    rows = []
    with LocalPool(target, workers=1, job_timeout=JOB_TIMEOUT_S) as pool:
        for h in ACTIVE:
            t0 = time.perf_counter()
            v = pool.evaluate(h.task, (HOSTILE / h.file).read_text(), h.case_set,
                              timeout=HANG_TIMEOUT_S if h.hang else None).verdict
            ok = v.kind == h.kind and h.message in v.message and h.case in (v.failing_case or "")
            rows.append({"file": h.file, "task": h.task, "expected": h.kind, "got": v.kind, "ok": ok,
                         "seconds": round(time.perf_counter() - t0, 2), "verdict": v.one_line()[:200]})
            print(f"  {'ok ' if ok else 'BAD'} {h.file:<36} expected {h.kind:<15} got {v.one_line()[:90]}", flush=True)
        print(f"containment: {pool.contained}")
        return rows, pool.contained


def chain(target: Any) -> list[dict[str, Any]]:
    from bench.registry import get_task

    expert = get_task("vector_add").baseline_source()
    wrong = (HOSTILE / "off_by_one.py").read_text()
    rows = []
    with LocalPool(target, workers=1, job_timeout=JOB_TIMEOUT_S) as pool:
        for attack in CHAIN:
            first = pool.evaluate("vector_add", (HOSTILE / attack).read_text(), "visible").verdict
            w = pool.evaluate("vector_add", wrong, "visible").verdict
            e = pool.evaluate("vector_add", expert, "visible").verdict
            ok = w.kind == "wrong_result" and e.kind == "correct"
            rows.append({"attack": attack, "attack_verdict": first.kind, "wrong_after": w.kind, "expert_after": e.kind,
                         "ok": ok})
            print(f"  {'ok ' if ok else 'BAD'} {attack:<32} then wrong kernel: {w.kind}, then expert: {e.kind}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--json", dest="json_out", type=Path, default=ROOT / "runs" / "judge-check.json")
    ap.add_argument("--workers", type=int, default=None, help="throughput: candidates at a time on each side")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args(argv)
    target = detect_target()
    print(f"target: {target.vendor} ({target.device_name})")
    print("hostile corpus:")
    rows, contained = corpus(target)
    result: dict[str, Any] = {"target": target.to_json(), "containment": contained, "corpus": rows}
    print("same-worker chain (attack, wrong kernel, expert):")
    result["chain"] = chain(target)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2))
    if not args.skip_throughput:
        from benchmarks.bench_evaluator_throughput import main as throughput

        print("throughput, pool vs naive:")
        out = args.json_out.with_name(args.json_out.stem + "-throughput.json")
        throughput(["--n", str(args.n), "--json", str(out), *(["--workers", str(args.workers)] if args.workers else [])])
        result["throughput"] = json.loads(out.read_text())
        args.json_out.write_text(json.dumps(result, indent=2))
    bad = [r for r in result["corpus"] + result["chain"] if not r["ok"]]
    print(f"corpus {len(result['corpus']) - len([r for r in result['corpus'] if not r['ok']])}/{len(result['corpus'])} "
          f"right, chain {sum(r['ok'] for r in result['chain'])}/{len(result['chain'])}; JSON: {args.json_out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
