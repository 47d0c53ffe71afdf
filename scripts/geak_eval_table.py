"""Which GEAK-eval files the adapter turns into tasks, and why each other file is skipped.

Downloads nothing and runs none of the suite's code: it reads the folder you point at (the
`geak_eval/data` folder of the GEAK-eval wheel, a GEAK-eval checkout, or thunlp's TritonBench
`data/` folder) and prints, for each set found (TritonBench-revised, ROCm) and each vendor
targeted (NVIDIA, AMD), how many files are adapted, how their entry points are reached, and
one line per skipped file with its reason.

    pip download --no-deps geak-eval==0.1.5 -d /tmp/geak && cd /tmp/geak && python -m zipfile -e *.whl .
    python scripts/geak_eval_table.py /tmp/geak/geak_eval/data [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adapters import AdapterError, load_source  # noqa: E402

SETS = (("tritonbench", "TritonBench-revised"), ("rocm", "ROCm"))
VENDORS = ("nvidia", "amd")


def table(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"root": str(root), "vendors": {}}
    for vendor in VENDORS:
        report = load_source("geak-eval", root, vendor=vendor)
        rows: dict[str, Any] = {}
        for kind, label in SETS:
            tasks = [t for t in report.tasks if kind in t.suites]
            folder = "TritonBench_G_v1" if kind == "tritonbench" else "ROCm_v1"
            skipped = [s for s in report.skipped if Path(s.path).parent.name.startswith(folder.split("_")[0])]
            total = len(tasks) + len(skipped)
            if total == 0:
                continue
            rows[kind] = {
                "label": label, "adapted": len(tasks), "total": total,
                "entry_points": dict(Counter(getattr(t, "entry_kind", "function") for t in tasks)),
                "seeded": sum(t.seeded_rng for t in tasks),
                "skipped": [{"file": Path(s.path).name, "reason": s.reason} for s in skipped],
            }
        out["vendors"][vendor] = {"sets": rows, "notes": report.notes}
    return out


_KINDS = {"function": "wrapper", "apply": "Fn.apply alias", "class_apply": "Cls.apply called by the test",
          "launch": "kernel launched by the test"}


def render(result: dict[str, Any]) -> str:
    lines = [f"GEAK-eval files under {result['root']}"]
    for vendor, data in result["vendors"].items():
        lines.append("")
        lines.append(f"targeting {vendor.upper()}:")
        for row in data["sets"].values():
            kinds = ", ".join(f"{n} {_KINDS.get(k, k)}" for k, n in sorted(row["entry_points"].items()))
            lines.append(f"  {row['label']}: {row['adapted']}/{row['total']} adapted ({kinds}; "
                         f"{row['seeded']} draw random numbers and are seeded)")
            for s in row["skipped"]:
                lines.append(f"    skipped {s['file']}: {s['reason']}")
        for note in data["notes"]:
            if note.startswith("warning"):
                lines.append(f"  {note}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the GEAK-eval data folder (or a checkout, or thunlp's data/)")
    ap.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    args = ap.parse_args()
    try:
        result = table(args.folder)
    except AdapterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(render(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
