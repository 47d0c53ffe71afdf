"""Where a judge worker's start goes (issue 42): a run's workers are judging nothing until they
are ready (6-8 s on an H100 host, `worker_start` in bench_compare_gpu.py --steps), and every
run pays it. Prints, each in a fresh process or folder so nothing is found warm that a run
would not find warm: torch's import with and without the caller's bytecode folder
(PYTHONPYCACHEPREFIX), the judge worker's own imports, Triton's helpers built in an empty cache
(judge/source_caches.py `build_helpers`), and the candidate template's start with its steps.

    python scripts/worker_start_profile.py [--device cuda]

On the lent H100 image (session 27): torch's import 4.51 s without a bytecode folder and 4.35 s
with one primed, so the workers do not use one (the import is torch's libraries, not its
bytecode); Triton's helpers 6.5 s in an empty cache; the template 5.2 s (torch 4.1 s of it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMPORT_TORCH = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
WORKER_IMPORTS = ("import torch, time; t = time.perf_counter(); import judge.worker, judge.remote, judge.oracle, "
                  "judge.precompile, judge.source_caches; print(time.perf_counter() - t)")
HELPERS = ("import pathlib, tempfile, time; from judge.source_caches import build_helpers; "
           "t = time.perf_counter(); built = build_helpers(pathlib.Path(tempfile.mkdtemp()), False); "
           "print(time.perf_counter() - t, len(built))")
TEMPLATE = ("import json, time, sys; from judge.remote import TemplateProcess; t = time.perf_counter(); "
            "p = TemplateProcess(sys.argv[1]); print(json.dumps({'seconds': time.perf_counter() - t, "
            "'steps': p.startup})); p.close()")


def _seconds(code: str, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() \
        else f"failed: {done.stderr.strip()[-300:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    base["PYTHONDONTWRITEBYTECODE"] = "1"  # as the workers run
    prefix = os.environ.get("PYTHONPYCACHEPREFIX", "")
    report = {"torch import, no bytecode folder": _seconds(IMPORT_TORCH, base)}
    if prefix:
        report["torch import, bytecode folder"] = _seconds(IMPORT_TORCH, {**base, "PYTHONPYCACHEPREFIX": prefix})
    env = {**base, **({"PYTHONPYCACHEPREFIX": prefix} if prefix else {})}
    report["judge worker modules, torch already imported"] = _seconds(WORKER_IMPORTS, env)
    if args.device != "cpu":
        report["Triton helpers in an empty cache (seconds, entries)"] = _seconds(HELPERS, env)
    report["candidate template start"] = _seconds(TEMPLATE, env, args.device)
    for what, value in report.items():
        print(f"{what}: {value}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
