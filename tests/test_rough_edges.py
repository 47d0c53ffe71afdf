"""Issue 46 item 3: the rough edges a reviewer hit on a published run, one test each.

export into a read-only run folder, the resume hint in the command the run was started with,
progress on a stderr that is not a terminal, empty --tasks/--methods, "evaluations" on a CPU
run's tables, pilot variance shares that are shares, a finished run resumed, every option's
default in its help, and report/figures/export writing beside the run folder, never inside it.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from record.provenance import launcher
from record.run_folder import RunFolder, output_folder
from results.export import export_run
from tests.fixtures.synthetic_run import make_synthetic_run
from tests.helpers import ROOT, cli_env
from tests.test_cli_usability import invoke

SHIPPED = ROOT / "benchmarks" / "results" / "gpu_run_small"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_synthetic_run(tmp_path / "runs" / "20250101-000000-aaaaaa")


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and modification time: what 'unchanged' means."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------- export on a read-only run folder
def _read_only_cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python cli.py ARGS` with `folder` mounted read-only (a user and mount namespace of its own,
    so even root cannot write there, as on a read-only share); skipped where namespaces are refused."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are refused here")
    command = " ".join(f"'{a}'" for a in (sys.executable, str(ROOT / "cli.py"), *args))
    script = (f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' && exec {command}")
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                          capture_output=True, text=True, timeout=300, env=cli_env(), cwd=str(ROOT))


def test_export_into_a_read_only_run_folder_holding_export_is_one_line(run: Path) -> None:
    """It used to find export/ there (mkdir succeeded), write into it and die in a traceback (exit 1)."""
    (run / "export").mkdir()
    before = snapshot(run)
    proc = _read_only_cli(run, "export", str(run), "--out", str(run / "export"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == f"error: cannot write to {run / 'export'}: Read-only file system"
    # By default it writes beside the run folder, which a read-only run folder does not stop.
    proc = _read_only_cli(run, "export", str(run))
    assert proc.returncode == 0, proc.stderr
    beside = run.parent / f"{run.name}-export"
    assert f"units: {beside / 'units.csv'} (12 rows)" in proc.stdout
    assert snapshot(run) == before


# ---------------------------------------------------------------------------- the resume hint
@pytest.mark.parametrize(("argv0", "expected"), [
    ("cli.py", "python cli.py"), (str(ROOT / "cli.py"), "python cli.py"),
    ("/elsewhere/tools/cli.py", "python /elsewhere/tools/cli.py"), ("kmc", "kmc"),
    ("/opt/nowhere/bin/kmc", "/opt/nowhere/bin/kmc"), ("", "python cli.py"),
])
def test_the_launcher_is_what_started_the_run(argv0: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert launcher([argv0, "compare"] if argv0 else []) == expected


def test_the_resume_hint_repeats_the_command_the_run_was_started_with(run: Path) -> None:
    """A run started with `kmc` is resumed with `kmc` (the hint used to say `python cli.py` always,
    which fails where the toolkit is installed and cli.py is not in the current folder); the
    report's line for errored units says the same."""
    import sqlite3

    from results.analysis import analyse
    from results.readers import load_run
    from results.report import failure_blocks
    from runners.compare import resume_command

    (run / "env.json").write_text(json.dumps({"command_line": ["kmc", "compare", "--budget", "4"]}))
    assert resume_command(run) == f"kmc compare --resume {run}"
    assert resume_command(run, "--retry-errors") == f"kmc compare --resume {run} --retry-errors"
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("UPDATE units SET error = 'model call failed: 500' WHERE method = 'direct' AND task = 'flip'")
    blocks = failure_blocks(analyse(load_run(run), 200, 0))
    assert "`kmc compare --resume RUN --retry-errors` runs them again" in blocks[1].content
    (run / "env.json").write_text(json.dumps({"command_line": ["cli.py", "compare"]}))
    assert resume_command(run).startswith("python cli.py compare --resume ")


# ---------------------------------------------------------------------------- progress without a terminal
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(stream: io.StringIO) -> None:
    """Two units of 3 calls each, charged call by call, as a run reports them."""
    from modelio.ledger import Charge
    from runners.progress import Progress, RunStarted
    from runners.progress_display import ProgressDisplay

    display = ProgressDisplay(stream)
    progress = Progress(2, 6, display.update)
    display.start(RunStarted(Path("runs/x"), False, 2, "calls"))
    for unit in ("direct/softmax/repeat 0", "geak/softmax/repeat 0"):
        for i in range(3):
            progress.charged(Charge(unit.split("/")[0], "softmax", 0, i, 1, 100, 50, False, False))
        progress.evaluated()
        progress.unit_finished(0, unit=unit)
    display.close()


def test_progress_is_one_line_per_finished_unit_when_stderr_is_not_a_terminal() -> None:
    """Redirected to a file, the bar wrote an update per call on one line (213 KB for a small run)."""
    out = io.StringIO()
    _drive(out)
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        "unit 1/2 finished: direct/softmax/repeat 0; spent 3 of 6 calls, 1 evaluations",
        "unit 2/2 finished: geak/softmax/repeat 0; spent 6 of 6 calls, 2 evaluations"]
    live = _Terminal()
    _drive(live)
    assert "\r" in live.getvalue() and "finished:" not in live.getvalue()  # a terminal keeps the live bar


def test_compare_draws_its_progress_through_the_display() -> None:
    """The command uses the display (a bar drawn in cli.py would not know about terminals)."""
    import inspect

    import cli

    source = inspect.getsource(cli.compare.callback)
    assert "ProgressDisplay(sys.stderr" in source and "tqdm" not in source


# ---------------------------------------------------------------------------- empty lists
@pytest.mark.parametrize("option", ["--tasks", "--methods"])
def test_an_empty_list_of_names_is_an_error(option: str, tmp_path: Path) -> None:
    """`--tasks ""` used to run the default suite (every task), silently."""
    code, out, err = invoke("compare", option, "", "--budget", "1", "--out", str(tmp_path / "runs"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {option} is empty: give comma-separated names, or leave "
                                        f"{option} out for the default"]
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------- a CPU run's tables
def _as_cpu_run(run: Path) -> Path:
    data = json.loads((run / "config.json").read_text())
    data["resolved"]["target"] = {"vendor": "cpu", "device_name": "CPU (Triton interpreter)", "device_count": 0,
                                  "interpreter": True}
    (run / "config.json").write_text(json.dumps(data))
    return run


def test_a_cpu_runs_tables_count_evaluations_not_gpu_evals(run: Path) -> None:
    from results.analysis import analyse
    from results.readers import load_run
    from results.summary import build_summary, format_table
    from results.tables import build_tables

    gpu = {t.name: t for t in build_tables(analyse(load_run(run), 200, 0))}
    assert "GPU evals/unit" in gpu["accuracy"].text.columns  # a GPU run keeps its words
    tables = build_tables(analyse(load_run(_as_cpu_run(run)), 200, 0))
    for t in tables:
        words = " ".join([t.title, *map(str, t.text.columns), *t.notes])
        assert "GPU eval" not in words, t.name
    by_name = {t.name: t for t in tables}
    assert "evaluations/unit" in by_name["accuracy"].text.columns
    assert "evaluations" in by_name["parallel"].text.columns
    header = format_table(build_summary(run), interpreter=True).splitlines()[2]
    assert "GPU" not in header and " evals " in header


# ---------------------------------------------------------------------------- pilot shares
def test_pilot_variance_shares_are_shares(tmp_path: Path) -> None:
    """The model's variance parameters are ratios, not shares: the first shipped run's true per-task
    differences varied 1.8 x 2P(1-P), printed as a 'share' of 1.800; in the re-recorded run a unit
    varies 1.446 x P(1-P) around its task's rate. Shares now split a per-task difference's
    variance into its between-task and repeat-noise parts, and sum to 1."""
    from results.planning import make_plan

    shipped = tmp_path / "shipped"  # a copy: opening the store leaves SQLite's files beside it
    shutil.copytree(SHIPPED, shipped)
    plan = make_plan(10, 2, None, shipped)
    model = plan.to_json()["model"]
    assert 0 <= model["between_share"] <= 1 and 0 <= model["within_share"] <= 1
    assert model["between_share"] + model["within_share"] == pytest.approx(1)
    assert model["between_var_ratio"] == pytest.approx(0.241, abs=1e-3)  # the model's parameters, under their own names
    assert model["within_var_ratio"] == pytest.approx(1.446, abs=1e-3)  # above 1: not a share
    line = next(x for x in plan.text().splitlines() if x.startswith("variance:"))
    assert "25% is between tasks and 75% repeat noise" in line
    assert all(float(v) <= 100 for v in re.findall(r"(\d+)% ", line))


# ---------------------------------------------------------------------------- a finished run resumed
def test_resuming_a_finished_run_says_it_is_complete(run: Path) -> None:
    """It used to start the worker pool, run nothing and say nothing about it."""
    from results.summary import build_summary
    from runners.compare import CompareOptions, run_compare
    from runners.config import CompareConfig

    said: list[str] = []
    before = snapshot(run)
    result = run_compare(CompareConfig(), CompareOptions(resume=run, on_message=said.append))
    assert said == [f"{run} is complete: all 12 units finished; nothing to resume"]
    assert result.resumed and result.summary == build_summary(run)
    after = snapshot(run)
    assert set(after) - set(before) == {"summary.json"}  # written once, as the run would have
    assert {k: v for k, v in after.items() if k in before} == before
    said.clear()
    run_compare(CompareConfig(), CompareOptions(resume=run, on_message=said.append))
    assert snapshot(run) == after  # a second resume changes nothing


# ---------------------------------------------------------------------------- help names defaults
def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        return [c for name, sub in command.commands.items() for c in _commands(sub, (*path, name))]
    return [(" ".join(path), command)]


def test_every_options_help_names_its_default() -> None:
    """Required options have none, and a plain on/off flag is off unless given; every other option's
    help says what happens without it (`show_default`, `[default ...]` or `... by default`)."""
    import cli

    missing = []
    for name, command in _commands(cli.cli):
        for p in command.params:
            if not isinstance(p, click.Option) or p.name == "help" or p.required:
                continue
            if p.is_flag and not p.secondary_opts:
                continue
            if not (p.show_default or re.search(r"\[default|by default", p.help or "", re.IGNORECASE)):
                missing.append(f"{name} {'/'.join(p.opts)}")
    assert missing == []


# ---------------------------------------------------------------------------- outputs beside the run
def test_export_writes_beside_the_run_folder_never_inside(run: Path) -> None:
    """A reviewer's copy of a published run used to gain export/ (and report/, figures/: below)."""
    before = snapshot(run)
    assert export_run(run).units == run.parent / f"{run.name}-export" / "units.csv"
    assert output_folder([run, run.parent / "other"], "report") == run.parent / f"{run.name}-report-combined-2"
    assert output_folder([Path(".")], "figures") == Path.cwd().parent / f"{Path.cwd().name}-figures"
    assert snapshot(run) == before


@pytest.mark.slow
def test_report_and_figures_write_beside_the_run_folder_never_inside(run: Path) -> None:
    from results.report import write_figures_only, write_report

    before = snapshot(run)
    report = write_report([run], n_resamples=200)
    figures = write_figures_only([run], n_resamples=200)
    assert report.report == run.parent / f"{run.name}-report" / "report.md"
    assert {f.files[0].parent for f in figures.figures if not f.skipped} == {run.parent / f"{run.name}-figures"}
    twin = make_synthetic_run(run.parent / "20250101-000000-bbbbbb", seed=1)
    both = write_report([run, twin], n_resamples=200)
    assert both.report.parent == run.parent / f"{run.name}-report-combined-2"
    assert snapshot(run) == before and RunFolder(run).read_summary() is None


# ---------------------------------------------------------------------------- summary.json: unsupported on the interpreter
def test_summary_counts_final_submissions_the_interpreter_could_not_run(run: Path) -> None:
    """`unsupported_on_interpreter` is neither a pass nor the method's failure: counted apart, per
    method, as the outcome figure counts it."""
    from results.analysis import headline
    from results.readers import load_run
    from results.summary import summarize

    data = load_run(run)
    subs = data.submissions
    final = subs[(subs["method"] == "direct") & (subs["task"] == "flip")]["submission_index"].idxmax()
    subs.loc[final, "hidden_verdict"] = "unsupported_on_interpreter"
    summary = summarize(headline(data))
    assert {m: e["unsupported_on_interpreter"] for m, e in summary["methods"].items()} == {
        "direct": 1, "reflexion": 0, "geak": 0}
    assert json.loads(json.dumps(summary))["methods"]["direct"]["unsupported_on_interpreter"] == 1
