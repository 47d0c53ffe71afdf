"""A report needs only the run folder (issue 45 item 2): results/ imports no task registry (the
import-linter contract "results never imports bench" checks the code; this checks a process),
and what a report shows of a task comes from what the run recorded, a run recorded before a
fact was kept saying "unknown" rather than asking the registry of the machine at hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from results.analysis import analyse
from results.readers import load_run, task_difficulty
from results.tables import build_tables
from tests.fixtures.synthetic_run import DIFFICULTY, make_synthetic_run

ROOT = Path(__file__).resolve().parents[1]


def _without_difficulty(run: Path) -> Path:
    """The run as the first runs were recorded: no task_difficulty in config.json."""
    path = run / "config.json"
    data = json.loads(path.read_text())
    del data["resolved"]["task_difficulty"]
    path.write_text(json.dumps(data))
    return run


def test_difficulty_is_what_the_run_recorded(tmp_path: Path) -> None:
    data = load_run(make_synthetic_run(tmp_path / "run"))
    assert task_difficulty(data, list(data.tasks)) == {t: DIFFICULTY[t] for t in data.tasks}


def test_a_run_recorded_without_difficulty_reports_it_unknown(tmp_path: Path) -> None:
    data = load_run(_without_difficulty(make_synthetic_run(tmp_path / "run")))
    assert set(task_difficulty(data, list(data.tasks)).values()) == {None}
    table = {t.name: t for t in build_tables(analyse(data, n_resamples=200))}["difficulty"].text
    assert set(table["difficulty"]) == {"unknown"}


@pytest.mark.slow  # seconds: whole reports and figures (the full suite runs it)
def test_report_and_export_load_no_task_registry(tmp_path: Path) -> None:
    """In a fresh process, the report and the export of a run import neither bench/ nor torch, even
    for a run that recorded no difficulty (where readers once asked the task registry)."""
    run = _without_difficulty(make_synthetic_run(tmp_path / "run"))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from results.export import export_run\n"
        "from results.report import write_report\n"
        f"run = Path({str(run)!r})\n"
        f"write_report([run], Path({str(tmp_path / 'report')!r}), fmt='md', n_resamples=200)\n"
        f"export_run(run, fmt='csv', out_dir=Path({str(tmp_path / 'export')!r}))\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.split('.')[0] == 'bench')\n"
        "assert not loaded, loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "report" / "report.md").is_file()
