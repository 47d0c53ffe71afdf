"""The command line behaves like the tools people know (issue 17, item 5): config files
forgive a scalar where a list is expected and point at the line and column of a syntax
error, typos get a did-you-mean, a token budget must be given, --dry-run applies every
method option, --version answers, eval --json counts the cases it ran, a missing entry
point is named as such, and no documented option ends in a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types
from pathlib import Path

import click
import pytest

import cli
from judge.candidate.verdict import Evaluation, Verdict, missing_entry_point
from judge.device import Target
from runners.compare import estimate_compare
from runners.config import CompareConfig, ConfigError, compose_config, load_config_file
from runners.judge_file import FileVerdict
from tests.helpers import ROOT

CPU = {"device": "cpu", "task_sources": [], "method_modules": []}


def invoke(*args: str) -> tuple[int, str, str]:
    """Run the CLI in this process as `kmc ARGS` would: (exit status, stdout, stderr). An
    exception escaping `cli.main` (a traceback for the user) fails the test."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["kmc", *args]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as stop:
        code = stop.code
    finally:
        sys.argv = old
    return int(code or 0), out.getvalue(), err.getvalue()


# ---------------------------------------------------------------------------- config files
def test_a_scalar_is_accepted_where_a_list_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("tasks: vector_add\nmethods: direct\n")
    config = compose_config(CPU, path)
    assert config.tasks == ["vector_add"] and config.methods == ["direct"]
    path.write_text("tasks: vector_add, softmax\nmethods: [direct, geak]\n")
    config = compose_config(CPU, path)
    assert config.tasks == ["vector_add", "softmax"] and config.methods == ["direct", "geak"]
    path.write_text("tasks: 3\n")
    with pytest.raises(ConfigError, match="tasks must be a name or a list of names, got 3"):
        compose_config(CPU, path)


def test_yaml_and_json_syntax_errors_give_line_and_column(tmp_path: Path) -> None:
    cases = {"a.yaml": ("budget: 3\nmethods: [direct\n", "line 3, column 1: expected ',' or ']'"),
             "b.yaml": ("budget: 3\n  bad: indent\n", "line 2, column 6: mapping values are not allowed here"),
             "c.json": ('{"budget": 3,\n "methods": [direct]}', "line 2, column 14: Expecting value")}
    for name, (text, needle) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config_file(path)
        assert needle in str(info.value) and "\n" not in str(info.value)


def test_unknown_keys_get_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("budgit: 4\nrepeats: 2\nzzz: 1\n")
    with pytest.raises(ConfigError, match=r"unknown config key\(s\): budgit \(did you mean budget\?\), zzz$"):
        compose_config(CPU, path)
    path.write_text("endpoint: {modle: x}\n")
    with pytest.raises(ConfigError, match=r"unknown endpoint key\(s\): modle \(did you mean model\?\)"):
        compose_config(CPU, path)


@pytest.mark.parametrize("text, needle", [
    ("repeats: '2'\n", "repeats must be an integer of at least 1, got '2'"),
    ("seed: 1.5\n", "seed must be an integer, got 1.5"),
    ("workers: 0\n", "workers must be at least 1 (or left out for the default), got 0"),
    ("method_options: {direct: 3}\n", "method_options must map each method to a mapping"),
    ("charge_failed_calls: 'yes'\n", "charge_failed_calls must be true or false"),
    ("endpoint: {max_concurrency: 0}\n", "max_concurrency must be a positive integer, got 0"),
    ("suite: [quick]\n", "suite must be a suite name"),
])
def test_wrong_types_in_a_config_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        compose_config(CPU, path).validate()
    assert needle in str(info.value)


def test_a_token_budget_unit_needs_an_explicit_budget(tmp_path: Path) -> None:
    for unit, suggested in (("tokens", "300000"), ("total_tokens", "300000"), ("output_tokens", "80000")):
        with pytest.raises(ConfigError, match=f"--budget-unit {unit} needs --budget in tokens .* --budget {suggested} "):
            compose_config({**CPU, "budget_unit": unit})
    assert compose_config({**CPU, "budget_unit": "tokens", "budget": 300000}).budget == 300000
    path = tmp_path / "c.yaml"
    path.write_text("budget_unit: output_tokens\nbudget: 50000\n")
    assert compose_config(CPU, path).budget == 50000  # given in the file: fine
    assert compose_config({**CPU, "budget_unit": "calls"}).budget == CompareConfig.budget


# ---------------------------------------------------------------------------- dry run
def test_dry_run_applies_every_method_option() -> None:
    """The paper preset: direct stops after one sample, GEAK after runs x iterations x 2 calls,
    Reflexion spends the budget in trials of at most 1 + 1 + 2 (max_iters - 1) calls."""
    config = compose_config({**CPU, "tasks": ["vector_add", "softmax"], "budget": 50}, ROOT / "configs" / "paper.yaml")
    config.method_options["geak"].update(runs=2, iterations=3)
    calls = {m.method: m.calls for m in estimate_compare(config).methods}
    assert calls == {"direct": 2 * 1, "reflexion": 2 * 50, "geak": 2 * (2 * 3 * 2)}
    config.method_options["direct"]["max_samples"] = 7
    assert {m.method: m.calls for m in estimate_compare(config).methods}["direct"] == 2 * 7


@pytest.mark.slow
def test_the_paper_presets_dry_run_is_what_a_run_spends(tmp_path: Path) -> None:
    """The estimate against a real (simulated, CPU) run of the paper preset: direct's one call
    per unit exactly, GEAK's runs x iterations x 2 exactly (it spends every call), Reflexion
    at most the estimate (its trials stop when its own tests pass)."""
    from runners.compare import CompareOptions, run_compare

    config = compose_config({**CPU, "tasks": ["vector_add"], "budget": 8, "workers": 1},
                            ROOT / "configs" / "paper.yaml")
    config.method_options["geak"].update(runs=2, iterations=2)
    config.method_options["reflexion"].update(max_iters=2)
    estimated = {m.method: m.calls for m in estimate_compare(config).methods}
    assert estimated == {"direct": 1, "geak": 8, "reflexion": 8}
    spent = run_compare(config, CompareOptions(out=tmp_path)).summary["methods"]
    calls = {name: sum(m["calls_used"].values()) for name, m in spent.items()}
    assert calls["direct"] == estimated["direct"] and calls["geak"] == estimated["geak"]
    assert 0 < calls["reflexion"] <= estimated["reflexion"]


# ---------------------------------------------------------------------------- eval's record
def test_eval_json_counts_the_case_that_failed() -> None:
    target = Target("cpu", True, "cpu", 0)
    wrong = FileVerdict(Evaluation(Verdict("wrong_result", "mismatch", "hidden-n4097", cases_run=2)), target)
    assert wrong.to_json()["cases_run"] == 3 and wrong.to_json()["cases_passed"] == 2
    right = FileVerdict(Evaluation(Verdict("correct", cases_run=5)), target)
    assert right.to_json()["cases_run"] == 5 and right.to_json()["cases_passed"] == 5
    unloadable = FileVerdict(Evaluation(Verdict("syntax_error", "bad")), target)
    assert unloadable.to_json()["cases_run"] == 0


def test_a_missing_entry_point_is_its_own_verdict() -> None:
    module = types.ModuleType("candidate_vector_add")
    exec("def add_vectors(x, y):\n    return x\n\ndef helper():\n    pass\n", module.__dict__)
    v = missing_entry_point("vector_add", module)
    assert v.kind == "missing_entry_point" and not v.ran and not v.correct
    assert v.message.startswith("the candidate defines no function 'vector_add' (it defines add_vectors, helper; "
                                "did you mean add_vectors?)")
    empty = missing_entry_point("vector_add", types.ModuleType("candidate_empty"))
    assert "(it defines none)" in empty.message
    assert Verdict.from_json(v.to_json()) == v


# ---------------------------------------------------------------------------- the CLI itself
def test_version_names_the_toolkit() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and out.startswith("kmc 0.") and len(out.strip().splitlines()) == 1


def test_kmc_is_an_installed_command_for_the_same_cli_and_the_licence_is_mit() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kmc"] == "cli:main"  # `pip install` puts `kmc` on PATH: the same commands
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_every_command_takes_verbose_and_log_file() -> None:
    def leaves(command: click.Command, path: str = "") -> list[tuple[str, click.Command]]:
        if isinstance(command, click.Group):
            return [leaf for name, sub in command.commands.items() for leaf in leaves(sub, f"{path} {name}".strip())]
        return [(path, command)]

    for name, command in leaves(cli.cli):
        flags = {opt for p in command.params for opt in getattr(p, "opts", [])}
        assert {"--verbose", "-v", "--log-file"} <= flags, name


# Every value-taking option of every command, given a value it must refuse (one line, exit 2,
# no traceback). The completeness check below fails when an option is added without a case.
BAD_VALUES: list[tuple[tuple[str, ...], str]] = [
    (("compare", "--budget", "0"), "budget must be a positive integer"),
    (("compare", "--budget-unit", "bytes"), "'bytes' is not one of"),
    (("compare", "--budget-unit", "tokens", "--dry-run"), "needs --budget in tokens"),
    (("compare", "--methods", "telepathy", "--dry-run"), "unknown method 'telepathy'"),
    (("compare", "--tasks", "vector_ad", "--dry-run"), "unknown task 'vector_ad'"),
    (("compare", "--suite", "nosuch", "--dry-run"), "unknown suite 'nosuch'"),
    (("compare", "--source", "nosuch:/tmp", "--dry-run"), "unknown adapter"),
    (("compare", "--repeats", "0", "--dry-run"), "repeats must be an integer of at least 1"),
    (("compare", "--seed", "x"), "'x' is not a valid integer"),
    (("compare", "--config", "/nonexistent/c.yaml"), "cannot read config"),
    (("compare", "--out", "/proc/kmc-not-writable", "--budget", "1", "--device", "cpu", "--tasks", "vector_add"),
     "not writable"),
    (("compare", "--resume", "/nonexistent"), "is not a folder"),
    (("compare", "--base-url", "http://127.0.0.1:9/v1"), "--model is required with --base-url"),
    (("compare", "--model", "x", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "KMC_NO_SUCH_KEY"),
     "model endpoint http://127.0.0.1:9/v1 is unreachable"),  # a local endpoint needs no key: unset is fine
    (("compare", "--device", "tpu"), "'tpu' is not one of"),
    (("compare", "--workers", "0", "--dry-run"), "workers must be at least 1"),
    (("compare", "--worker-user", "kmc-no-such-user", "--dry-run"), "no user 'kmc-no-such-user'"),
    (("compare", "--ray", " ", "--dry-run"), "ray_address must be an address, auto or local"),
    (("compare", "--ray", "local", "--worker-user", "nobody", "--dry-run"), "worker_user is not supported on the Ray"),
    (("compare", "--max-concurrency", "0", "--dry-run"), "max_concurrency must be a positive integer"),
    (("compare", "--replay", "/nonexistent"), "not a recorded run folder"),
    (("compare", "--lock-clocks", "12x"), "--lock-clocks takes 'auto'"),
    (("compare", "--log-file", "/nonexistent/dir/log.txt", "--dry-run"), "cannot write the log file"),
    (("compare", "--eval-budget", "0", "--dry-run"), "eval_budget must be a positive integer"),
    (("compare", "--oneshot-corpus", "/nonexistent.json", "--dry-run"), "is not a file"),
    (("compare", "--retry-errors", "--dry-run"), "--retry-errors goes with --resume"),
    (("compare", "--rejudge", "--dry-run"), "--rejudge goes with --replay"),
    (("eval", "--task", "nosuch", "--candidate", "cli.py", "--device", "cpu"), "unknown task 'nosuch'"),
    (("eval", "--task", "vector_add", "--candidate", "/nonexistent.py"), "does not exist"),
    (("eval", "--task", "vector_add", "--candidate", "cli.py", "--timeout", "-1"), "-1.0 is not in the range x>0"),
    (("eval", "--task", "vector_add", "--candidate", "cli.py", "--worker-user", "kmc-no-such-user", "--device", "cpu"),
     "no user 'kmc-no-such-user'"),
    (("eval", "--task", "vector_add", "--candidate", "cli.py", "--source", "nosuch:/tmp"), "unknown adapter"),
    (("eval", "--task", "vector_add", "--candidate", "cli.py", "--device", "tpu"), "'tpu' is not one of"),
    (("bench", "list", "--suite", "nosuch"), "unknown suite 'nosuch'"),
    (("bench", "list", "--source", "nosuch:/tmp"), "unknown adapter"),
    (("bench", "check", "--suite", "nosuch", "--device", "cpu"), "unknown suite 'nosuch'"),
    (("bench", "check", "--tasks", "vector_ad", "--device", "cpu"), "unknown task 'vector_ad'"),
    (("bench", "check", "--source", "nosuch:/tmp", "--device", "cpu"), "unknown adapter"),
    (("bench", "check", "--tasks", "vector_add", "--workers", "0", "--device", "cpu"), "--workers must be at least 1"),
    (("bench", "check", "--device", "tpu"), "'tpu' is not one of"),
    (("bench", "check", "--tasks", "vector_add", "--timing-seconds", "-1", "--device", "cpu"),
     "--timing-seconds must be positive"),
    (("bench", "check", "--shard", "3/2", "--device", "cpu"), "K must be between 1 and N"),
    (("bench", "check", "--tasks", "vector_add", "--skip-judged", "--device", "cpu"), "--skip-judged needs --jsonl"),
    (("bench", "check", "--tasks", "vector_add", "--timeout", "-1", "--device", "cpu"), "--timeout must be positive"),
    (("bench", "check", "--tasks", "vector_add", "--jsonl", "/nonexistent/progress.jsonl", "--device", "cpu"),
     "No such file or directory"),
    (("score", "--suite", "nosuch", "/tmp"), "unknown suite 'nosuch'"),
    (("score", "--suite", "quick", "--source", "nosuch:/tmp", "/tmp"), "unknown adapter"),
    (("score", "--suite", "quick", "--workers", "0", "--device", "cpu", "/tmp"), "--workers must be at least 1"),
    (("score", "--suite", "quick", "--device", "tpu", "/tmp"), "'tpu' is not one of"),
    (("serve-sim", "--reject-every", "-1"), "reject_every must be >= 0"),
    (("plan", "--tasks", "0"), "--tasks must be at least 2"),
    (("plan", "--tasks", "10", "--repeats", "0"), "--repeats must be at least 1"),
    (("plan", "--tasks", "10", "--baseline", "2"), "strictly between 0 and 1"),
    (("plan", "--tasks", "10", "--pilot", "/nonexistent"), "is not a folder"),
    (("serve-sim", "--host", "no.such.host.invalid", "--port", "0"), "cannot listen on no.such.host.invalid"),
    (("serve-sim", "--port", "99999"), "99999 is not in the range 0<=x<=65535"),
    (("serve-sim", "--latency", "-1"), "latency must be >= 0"),
    (("serve-sim", "--fail-rate", "2"), "fail rate must be in [0, 1]"),
    (("serve-sim", "--faults", "bogus"), "unknown fault kind(s) bogus"),
    (("serve-sim", "--seed", "x"), "'x' is not a valid integer"),
    (("report", "/nonexistent"), "is not a folder"),
    (("report", "--resamples", "0", "."), "0 is not in the range x>=100"),
    (("report", "--format", "pdf", "."), "'pdf' is not one of"),
    (("report", "--out", "/proc/kmc-not-writable", "{run}"), "cannot write"),
    (("figures", "/nonexistent"), "is not a folder"),
    (("figures", "--resamples", "0", "."), "0 is not in the range x>=100"),
    (("figures", "--out", "/proc/kmc-not-writable", "{run}"), "cannot write"),
    (("figures", "--style", "poster", "{run}"), "'poster' is not one of"),
    (("figures", "--format", "png,eps", "{run}"), "figure formats must be among png, pdf, svg, got eps"),
    (("runs", "list", "/nonexistent"), "is not a folder"),
    (("show", "/nonexistent", "--method", "direct", "--task", "vector_add"), "is not a folder"),
    (("show", "{run}", "--method", "gaek", "--task", "vector_add"), "the run has no method 'gaek'; did you mean geak?"),
    (("show", "{run}", "--method", "geak", "--task", "vector_ad"), "the run has no task 'vector_ad'"),
    (("show", "{run}", "--method", "geak", "--task", "vector_add", "--repeat", "-1"), "-1 is not in the range x>=0"),
    (("export", "/nonexistent"), "is not a folder"),
    (("export", "{run}", "--format", "xlsx"), "'xlsx' is not one of"),
    (("export", "{run}", "--out", "/proc/kmc-not-writable"), "cannot write to /proc/kmc-not-writable"),
    (("verify", "/nonexistent"), "is not a folder"),
    (("verify", "{run}", "--source", "nosuch:/tmp", "--device", "cpu"), "unknown adapter"),
    (("verify", "{run}", "--device", "tpu"), "'tpu' is not one of"),
    (("verify", "{run}", "--workers", "0"), "0 is not in the range x>=1"),
    (("verify", "{run}", "--timeout", "0"), "0.0 is not in the range x>0"),
    (("verify", "{run}", "--speedup-tolerance", "-1"), "-1.0 is not in the range x>=0"),
    (("verify", "{run}", "--candidates", "--device", "cpu", "--source", "geak-eval:/nonexistent"), "does not exist"),
    (("bench", "strength", "--suite", "nosuch"), "unknown suite 'nosuch'"),
    (("bench", "strength", "--tasks", "nosuch"), "unknown task 'nosuch'"),
    (("bench", "strength", "--source", "nosuch:/tmp"), "unknown adapter 'nosuch'"),
    (("bench", "strength", "--mutants", "0"), "0 is not in the range x>=1"),
    (("bench", "strength", "--seed", "abc"), "'abc' is not a valid integer"),
    (("bench", "strength", "--workers", "0"), "--workers must be at least 1"),
    (("bench", "strength", "--stress-factor", "0"), "0 is not in the range x>=1"),
    (("bench", "strength", "--differential-factor", "-1"), "-1 is not in the range x>=0"),
    (("bench", "strength", "--device", "tpu"), "'tpu' is not one of"),
    (("bench", "strength", "--tasks", "vector_add", "--out", "/proc/kmc-nope"), "--out /proc/kmc-nope"),
]
FLAGS_WITHOUT_VALUES = {"--help", "--json", "--quiet", "--dry-run", "--hidden", "--visible", "--verbose", "--all",
                        "--calls", "--sources", "--candidates", "--no-timing", "--reject-json-mode", "--reject-max-tokens",
                        "--titles", "--unsandboxed", "--allow-same-seed"}
SHARED = {"--log-file"}  # one callback for every command: one case (on compare) covers it


def test_every_value_taking_option_has_a_bad_value_case() -> None:
    covered = {(args[0], opt) for args, _ in BAD_VALUES for opt in args if opt.startswith("--")}
    covered |= {(args[1], opt) for args, _ in BAD_VALUES if args[0] in ("bench", "runs") for opt in args
                if opt.startswith("--")}
    missing = []
    for name, command in cli.cli.commands.items():
        subs = command.commands.items() if isinstance(command, click.Group) else [(name, command)]
        for sub_name, sub in subs:
            for param in sub.params:
                if isinstance(param, click.Option) and param.opts[0] not in FLAGS_WITHOUT_VALUES | SHARED:
                    if (sub_name, param.opts[0]) not in covered:
                        missing.append(f"{name} {sub_name} {param.opts[0]}")
    assert not missing, f"options without a bad-value case: {missing}"


@pytest.mark.slow
def test_no_documented_option_ends_in_a_traceback(tmp_path: Path) -> None:
    from tests.fixtures.synthetic_run import make_synthetic_run

    run = make_synthetic_run(tmp_path / "run")
    for args, needle in BAD_VALUES:
        args = tuple(a.replace("{run}", str(run)) for a in args)
        code, _, err = invoke(*args)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, (args, code, err)
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        assert needle in lines[0], (args, lines[0])


@pytest.mark.slow
def test_verbose_and_log_file_show_the_run_and_the_run_folder_keeps_its_log(tmp_path: Path) -> None:
    log_file = tmp_path / "mine.log"
    code, out, err = invoke("compare", "--budget", "2", "--methods", "direct", "--tasks", "vector_add", "--device",
                            "cpu", "--workers", "1", "--out", str(tmp_path / "runs"), "--quiet", "-v",
                            "--log-file", str(log_file))
    assert code == 0, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    run_log = (run_dir / "run.log").read_text()
    for needle in ("started", "unit direct/vector_add/repeat 0: started", "call 0 of direct/vector_add/repeat 0",
                   "call 1 of direct/vector_add/repeat 0", "evaluated vector_add on hidden cases",
                   "unit direct/vector_add/repeat 0: done; 2 calls", "finished: 1 units"):
        assert needle in run_log, needle
        assert needle in log_file.read_text() and needle in err, needle
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["methods"]["direct"]["calls_used"] == {"vector_add": 2}


def test_help_imports_no_heavy_package() -> None:
    """`cli.py --help` must work where torch, pandas or triton are not installed (a fresh
    machine before setup, a reviewer's laptop): the CLI's entry point imports them lazily."""
    import subprocess

    code = ("import sys; sys.argv = ['cli.py', '--help']; import cli\n"
            "try:\n    cli.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = [m for m in ('torch', 'pandas', 'triton', 'scipy', 'matplotlib') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr[-2000:]
