"""record/run_folder.py: the one owner of a run folder's config.json, env.json and summary.json."""

from __future__ import annotations

import ast
import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from record.provenance import PROJECT_ROOT, git_revision
from record.run_folder import FORMAT_VERSION, ResolvedRun, RunFolder, RunFolderError
from results.readers import RunError, read_run_info

CONFIG = {"budget": 4, "budget_unit": "calls", "methods": ["direct"], "method_options": {}, "suite": None,
          "tasks": ["vector_add"], "repeats": 1, "seed": 0, "device": "cpu"}
RESOLVED = ResolvedRun(tasks=("vector_add",), method_options={"direct": {"max_samples": None}}, budget_unit="calls",
                       model="m", simulated=True,
                       target={"vendor": "cpu", "interpreter": True, "device_name": "Triton CPU interpreter",
                               "device_count": 0},
                       task_difficulty={"vector_add": 1})


def test_config_round_trip_records_the_format_version(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.write_config(CONFIG, RESOLVED)
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["format_version"] == FORMAT_VERSION == 2
    assert raw["resolved"]["tasks"] == ["vector_add"] and raw["config"] == CONFIG
    recorded = folder.read_config()
    assert recorded.format_version == 2 and recorded.config == CONFIG and recorded.resolved == RESOLVED
    assert recorded.resolved.vendor == "cpu"


def test_a_folder_written_before_the_version_field_reads_as_version_1(tmp_path: Path) -> None:
    """The layout of the first runs: no format_version, no task_difficulty, no budget_unit or
    target in `resolved` (the budget unit then comes from the options)."""
    (tmp_path / "config.json").write_text(json.dumps({
        "config": {**CONFIG, "budget_unit": "output_tokens"},
        "resolved": {"tasks": ["vector_add", "softmax"], "method_options": {}, "model": "sim", "simulated": True}}))
    recorded = RunFolder(tmp_path).read_config()
    assert recorded.format_version == 1
    assert recorded.resolved.tasks == ("vector_add", "softmax") and recorded.resolved.budget_unit == "output_tokens"
    assert recorded.resolved.task_difficulty == {} and recorded.resolved.target == {}
    assert recorded.resolved.vendor == ""


@pytest.mark.parametrize("content, needle", [
    ("{not json", "is not a run's config (JSONDecodeError"),
    ("[1, 2]", "is not a run's config (AttributeError"),
    (json.dumps({"config": CONFIG}), "is not a run's config (KeyError: 'resolved')"),
    (json.dumps({"config": {**CONFIG, "budget": "4"}, "resolved": {"tasks": []}}), "config.budget is not int"),
    (json.dumps({"format_version": 99, "config": CONFIG, "resolved": {"tasks": []}}),
     "has format version 99; this toolkit reads up to 2"),
])
def test_a_malformed_config_is_one_line_naming_the_file(tmp_path: Path, content: str, needle: str) -> None:
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(RunFolderError, match="config.json") as info:
        RunFolder(tmp_path).read_config()
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_folder_or_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="is not a folder"):
        RunFolder(tmp_path / "nope").read_config()
    with pytest.raises(RunFolderError, match=r"is not a run folder \(no config.json\)"):
        RunFolder(tmp_path).read_config()


def test_env_records_code_packages_and_command_line(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.write_env({"target": RESOLVED.target, "python": "3.x"}, ["cli.py", "compare", "--budget", "4"])
    env = folder.read_env()
    assert env["target"] == RESOLVED.target and env["python"] == "3.x"  # the machine's facts are kept
    assert env["command_line"] == ["cli.py", "compare", "--budget", "4"]
    head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert env["git"]["commit"] == head.stdout.strip() and isinstance(env["git"]["dirty"], bool)
    else:
        assert env["git"] == {"commit": None, "dirty": None}
    for name in ("torch", "triton", "numpy", "scipy", "statsmodels", "pandas", "openai"):
        try:
            expected: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert env["packages"][name] == expected, name
    assert env["toolkit_version"] == "0.1.0" and env["started"] > 0

    folder.record_resume(["cli.py", "compare", "--resume", str(tmp_path)])
    env = folder.read_env()
    assert env["command_line"] == ["cli.py", "compare", "--budget", "4"]  # the start is kept
    assert [r["command_line"][-1] for r in env["resumed"]] == [str(tmp_path)]
    assert env["resumed"][0]["git"] == env["git"]


def test_git_revision_outside_a_checkout_is_unknown_not_guessed(tmp_path: Path) -> None:
    rev = git_revision(tmp_path)
    assert rev.commit is None and rev.dirty is None
    inside = PROJECT_ROOT / "results"  # a folder inside a checkout is not the checkout's root: not its code
    assert git_revision(inside) == git_revision(tmp_path)


def test_summary_is_written_sorted_and_indented_and_read_back(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.read_summary() is None  # an unfinished run has none
    folder.write_summary({"methods": {"b": 1, "a": None}, "budget": 4})
    assert (tmp_path / "summary.json").read_text() == (
        '{\n  "budget": 4,\n  "methods": {\n    "a": null,\n    "b": 1\n  }\n}\n')
    assert folder.read_summary() == {"methods": {"b": 1, "a": None}, "budget": 4}
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, renamed into place


def test_create_makes_a_fresh_folder_each_time_and_refuses_an_unwritable_output(tmp_path: Path) -> None:
    a = RunFolder.create(tmp_path / "runs", CONFIG)
    b = RunFolder.create(tmp_path / "runs", CONFIG)
    assert a.path != b.path and a.path.is_dir() and b.path.is_dir() and a.path.parent == tmp_path / "runs"
    assert not list((tmp_path / "runs").glob(".write-test-*"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RunFolderError, match="is not writable"):
        RunFolder.create(blocker / "runs", CONFIG)


def test_readers_take_the_identity_from_the_run_folder(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.write_config(CONFIG, RESOLVED)
    with pytest.raises(RunError, match="needs config.json and store.sqlite"):
        read_run_info(tmp_path)
    folder.store_path.write_bytes(b"")
    info = read_run_info(tmp_path)
    assert (info.tasks, info.budget, info.model, info.interpreter, info.task_difficulty) == (
        ("vector_add",), 4, "m", True, {"vector_add": 1})
    (tmp_path / "config.json").write_text(json.dumps({"format_version": 3, "config": CONFIG, "resolved": {}}))
    with pytest.raises(RunError, match="format version 3"):
        read_run_info(tmp_path)


RUN_FILES = {"config.json", "env.json", "summary.json"}


def _code_strings(path: Path) -> set[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}


def test_no_module_but_run_folder_names_the_run_files() -> None:
    """The files are opened through RunFolder only: no other module of the toolkit spells their names."""
    root = Path(__file__).resolve().parent.parent
    packages = ("bench", "commands", "judge", "methods", "modelio", "record", "results", "runners", "stats")
    sources = [root / "cli.py", *[p for pkg in packages for p in (root / pkg).rglob("*.py")]]
    offenders = {str(p.relative_to(root)): sorted(RUN_FILES & _code_strings(p)) for p in sources
                 if p.name != "run_folder.py"}
    assert {k: v for k, v in offenders.items() if v} == {}
