"""Merge `bench check --json` outputs (one per shard) into the figures a closing note quotes:
how many references pass their own hidden cases, the failures by verdict with one line each,
and how many hidden cases per task are new shapes.

    python cli.py bench check --source geak-eval:DATA --suite tritonbench --no-timing --shard 1/4 --json > s1.json
    ...
    python scripts/check_summary.py s1.json s2.json s3.json s4.json [--json figures.json]

A shard cut off by a time limit has no JSON; its `--jsonl FILE` progress file (one row per
task judged) merges the same way (`s3.jsonl`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def merge(paths: list[Path]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    devices = set()
    for p in paths:
        if p.suffix == ".jsonl":  # `bench check --jsonl`: a shard's rows as judged, kept by a run cut off
            for line in p.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    rows[row["task"]] = row
            continue
        data = json.loads(p.read_text())
        devices.add(data.get("device", "?"))
        for row in data["tasks"]:
            rows[row["task"]] = row
    unscorable = sorted(r["task"] for r in rows.values() if r["verdict"] == "unscorable")
    checked = [r for r in rows.values() if r["verdict"] not in ("skipped", "unscorable")]
    passed = [r for r in checked if r["verdict"] == "correct"]
    failures: dict[str, list[str]] = defaultdict(list)
    for r in checked:
        if r["verdict"] != "correct":
            first = (r.get("message") or "").splitlines()[0][:200] if r.get("message") else ""
            failures[r["verdict"]].append(f"{r['task']} [{r.get('failing_case') or '-'}]: {first}")
    shapes = [r["new_shapes"] for r in passed if r.get("new_shapes") is not None]
    return {
        "devices": sorted(devices), "tasks": len(rows), "checked": len(checked),
        "skipped": len(rows) - len(checked) - len(unscorable), "unscorable": unscorable, "passed": len(passed),
        "pass_rate": len(passed) / len(checked) if checked else None,
        "failures": {k: sorted(v) for k, v in sorted(failures.items())},
        "new_shapes": {"tasks_with_any": sum(1 for s in shapes if s > 0), "tasks": len(shapes),
                       "median": statistics.median(shapes) if shapes else None,
                       "histogram": dict(sorted(Counter(shapes).items()))},
    }


def render(m: dict[str, Any]) -> str:
    rate = f"{m['pass_rate']:.1%}" if m["pass_rate"] is not None else "n/a"
    where = ", ".join(m["devices"]) or "device not recorded (progress rows only)"
    lines = [f"{where}: {m['passed']}/{m['checked']} references pass their own hidden cases ({rate})"
             + (f"; {m['skipped']} skipped" if m["skipped"] else "")
             + (f"; {len(m['unscorable'])} unscorable (nothing returned or written: {', '.join(m['unscorable'])})"
                if m.get("unscorable") else "")]
    for kind, items in m["failures"].items():
        lines.append(f"{kind} ({len(items)}):")
        lines += [f"  {i}" for i in items]
    s = m["new_shapes"]
    if s["tasks"]:
        lines.append(f"new-shape hidden cases among passing references: {s['tasks_with_any']}/{s['tasks']} tasks have "
                     f"some, median {s['median']} per task; histogram {s['histogram']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shards", type=Path, nargs="+", help="bench check --json outputs (or --jsonl progress files)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = ap.parse_args()
    try:
        m = merge(args.shards)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot read the shards: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(render(m))
    if args.json is not None:
        args.json.write_text(json.dumps(m, indent=2))


if __name__ == "__main__":
    main()
