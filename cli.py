"""Command line: `python cli.py compare --budget 100` and friends (`kmc` is the same entry point).

This module is the group and the entry point only; each command group lives in a module of
commands/ (parse the options, call one library function, print what it returns), where tests
and users' scripts can also reach it:

    compare         commands/compare.py  runners.compare.run_compare (estimate_compare for --dry-run)
    eval            commands/judging.py  runners.judge_file.judge_file
    score           commands/judging.py  runners.score.score_suite
    verify          commands/judging.py  runners.verify.verify_run
    bench list      commands/bench.py    bench.listing.list_tasks
    bench check     commands/bench.py    runners.check.check_suite
    bench strength  commands/bench.py    runners.strength.run_strength
    report          commands/reports.py  results.report.write_report
    figures         commands/reports.py  results.report.write_figures_only
    plan            commands/reports.py  results.planning.make_plan
    runs list       commands/runs.py     results.run_list.list_runs
    show            commands/runs.py     results.unit_view.show_unit
    export          commands/runs.py     results.export.export_run
    serve-sim       commands/serve.py    modelio.server.serve

Nothing heavy runs at import (torch and triton are imported inside commands), so `--help` is
instant. Bad input of any kind ends with one line on stderr and exit status 2, never a
traceback; Ctrl-C ends with status 130.
"""

from __future__ import annotations

import logging
import sys

import click

from commands.bench import bench
from commands.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, logging_options, say
from commands.compare import compare
from commands.judging import eval_command, score_command, verify_command
from commands.reports import figures_command, plan_command, report_command
from commands.runs import export_command, runs_group, show_command
from commands.serve import serve_sim


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from record.provenance import this_version

    click.echo(this_version())
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the toolkit's version (and git commit) and exit.")
def cli() -> None:
    """Compare LLM kernel-writing methods at equal compute, on hidden tests, with error bars."""


cli.add_command(compare)
cli.add_command(eval_command)
cli.add_command(bench)
cli.add_command(score_command)
cli.add_command(serve_sim)
cli.add_command(report_command)
cli.add_command(figures_command)
cli.add_command(plan_command)
cli.add_command(runs_group)
cli.add_command(show_command)
cli.add_command(export_command)
cli.add_command(verify_command)
logging_options(cli)  # --verbose and --log-file on every command


# ---------------------------------------------------------------------------- entry point
# Errors that mean bad input (one line, exit 2), by module: looked up only among modules already
# imported, since an error class from a module nobody imported cannot have been raised (and
# importing them all up front would pull pandas and torch into `--help`).
_BAD_INPUT_ERRORS = (("bench.registry", "UnknownTaskError"), ("methods.registry", "UnknownMethodError"),
                     ("modelio.replay", "ReplayMiss"), ("record.run_folder", "RunFolderError"),
                     ("results.planning", "PlanError"), ("results.plugins", "PluginError"),
                     ("runners.config", "ConfigError"),
                     ("judge.sandbox", "SandboxRefused"))


def _bad_input_types() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[module], name) for module, name in _BAD_INPUT_ERRORS if module in sys.modules)


def main() -> None:
    """Run the CLI, turning the library's bad-input errors into one line and exit status 2."""
    logging.getLogger("kmc").addHandler(logging.NullHandler())  # records go to run.log and --verbose only
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        say("aborted")
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError):
            say(f"error: {exc.format_message()}")
            sys.exit(EXIT_BAD_INPUT)
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        say("interrupted; resume with --resume RUN_DIR")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        if not isinstance(exc, _bad_input_types()):
            raise
        say(f"error: {exc}")
        sys.exit(EXIT_BAD_INPUT)

if __name__ == "__main__":
    main()
