"""Run `bench strength` on a whole suite a few tasks at a time, writing the combined table,
CSVs and figure after each chunk, so a run cut off by a time limit keeps every task it
finished. Mutants and stress sets depend only on (seed, task), so the combined report is the
one `cli.py bench strength` gives for the same tasks and options.

    python scripts/strength_suite.py --suite full --mutants 6 --stress-factor 2 \\
        --differential-factor 3 --minutes 20 --out benchmarks/results/strength-builtin-seed0
    python scripts/strength_suite.py --source geak-eval:DIR --suite tritonbench --device auto --minutes 8 --out OUT
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import load_sources, suite_tasks  # noqa: E402
from bench.strength.report import (  # noqa: E402
    MutantOutcome,
    StrengthReport,
    TaskNote,
    draw_figure,
    format_report,
    write_csv,
)
from runners.strength import StrengthOptions, run_strength  # noqa: E402


def _load(path: Path) -> StrengthReport:
    """A report written by this script (strength.json), to go on from."""
    d = json.loads(path.read_text())
    return StrengthReport(d["suite"], d["device"], d["seed"], d["mutants_per_task"], list(d["tasks"]),
                          [MutantOutcome(**o) for o in d["outcomes"]], [TaskNote(**n) for n in d["notes"]],
                          dict(d["stress_cases"]), float(d["seconds"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="full")
    ap.add_argument("--source", action="append", default=[],
                    help="ADAPTER:PATH of an external suite (geak-eval:DIR); its --suite's tasks are run")
    ap.add_argument("--device", choices=["auto", "cpu"], default="cpu")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--mutants", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stress-factor", type=int, default=3)
    ap.add_argument("--differential-factor", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=3, help="tasks per chunk")
    ap.add_argument("--minutes", type=float, default=20.0, help="start no chunk after this many minutes")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true",
                    help="go on from OUT/strength.json (same options): its tasks are kept, not run again")
    ap.add_argument("--last", default="", help="comma-separated task ids to run after all the others")
    args = ap.parse_args()
    last = [t for t in args.last.split(",") if t]
    if args.source:
        from judge.device import detect_target

        load_sources(args.source, detect_target(force_cpu=args.device == "cpu").vendor)  # as run_strength loads them
    ids = [t.id for t in suite_tasks(args.suite) if t.id not in last] + last
    started = time.perf_counter()
    combined: StrengthReport | None = None
    if args.resume and (args.out / "strength.json").exists():
        combined = _load(args.out / "strength.json")
        if (combined.seed, combined.mutants_per_task) != (args.seed, args.mutants):
            sys.exit("--resume: the folder holds a run with another seed or mutant count")
        ids = [t for t in ids if t not in combined.tasks]
        started -= combined.seconds
    for first in range(0, len(ids), args.chunk):
        if time.perf_counter() - started > 60 * args.minutes:
            print(f"time limit: stopped before {ids[first:]}", file=sys.stderr)
            break
        chunk = tuple(ids[first:first + args.chunk])
        part = run_strength(StrengthOptions(args.suite, chunk, tuple(args.source), args.mutants, args.seed,
                                            args.workers, args.device,
                                            stress_factor=args.stress_factor,
                                            differential_factor=args.differential_factor))
        if combined is None:
            combined = part
            combined.tasks = list(chunk)
        else:
            combined.tasks += list(chunk)
            combined.outcomes += part.outcomes
            combined.notes += part.notes
            combined.stress_cases.update(part.stress_cases)
        combined.seconds = time.perf_counter() - started
        combined.suite_name = args.suite
        write_csv(combined, args.out)
        (args.out / "strength.json").write_text(json.dumps(combined.to_json(), indent=2))
        draw_figure(combined, args.out / "strength.png")
        (args.out / "table.txt").write_text(format_report(combined) + "\n")
        print(f"{combined.seconds:.0f} s: {', '.join(chunk)} done ({part.seconds:.0f} s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
