"""What the commands share: the bad-input error and exit statuses, list parsing, the options
several commands take (`--source`, `--device`, `--unsandboxed`) and the logging options
(`--verbose`, `--log-file`) that cli.py adds to every command."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

EXIT_BAD_INPUT = 2
EXIT_ERRORED_UNITS = 3  # the run finished, but some units ended on a failed model call (see the warning line)
EXIT_INTERRUPTED = 130
MIN_RESAMPLES = 100  # fewer give intervals that are noise (and 1 cannot give one at all)


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def split_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def name_list(value: str | None, option: str) -> list[str] | None:
    """A comma-separated list of names given on the command line; an empty one (`--tasks ""`) is
    bad input, never the default: the user asked for something and would silently get everything."""
    items = split_list(value)
    if value is not None and not items:
        raise BadInput(f"{option} is empty: give comma-separated names, or leave {option} out for the default")
    return items


SOURCE_HELP = ("Load tasks from an external suite, ADAPTER:PATH (geak-eval:DIR or kernelbench:DIR); repeatable; "
               "replaces $KMC_TASK_SOURCES [default: $KMC_TASK_SOURCES, else none]. Skipped files and their reasons "
               "are reported on stderr.")
DEVICE_HELP = ("auto: GPU if present, else the Triton CPU interpreter; cpu: always the interpreter "
               "[default auto; cpu when $KMC_FORCE_CPU=1].")
WORKERS_HELP = ("Judging worker processes [default: the usable cores, bounded per GPU by its free memory and by host "
                "memory; recorded in config.json]; timing has one lane per GPU either way.")


def source_option(command: Any) -> Any:
    """`--source ADAPTER:PATH` (repeatable), shared by every command that takes tasks."""
    return click.option("--source", "sources", multiple=True, metavar="ADAPTER:PATH", help=SOURCE_HELP)(command)


def device_option(command: Any) -> Any:
    return click.option("--device", type=click.Choice(["auto", "cpu"]), default=None, help=DEVICE_HELP)(command)


UNSANDBOXED_HELP = ("Judge candidates even where the candidate sandbox (its own namespaces, no capabilities, an "
                    "allow-listed filesystem) cannot be built here: candidate code then runs with the toolkit's "
                    "privileges. Off by default; refused without it. Recorded and printed on the report.")


def _accept_risk(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        from judge.sandbox import accept_risk

        accept_risk()
    return value


def unsandboxed_option(command: Any) -> Any:
    """`--unsandboxed` on a command that keeps no run config: this process's pools accept the risk."""
    return click.option("--unsandboxed", is_flag=True, expose_value=False, callback=_accept_risk,
                        help=UNSANDBOXED_HELP)(command)


def given_sources(sources: tuple[str, ...]) -> list[str] | None:
    """The --source values, or None when none was given (then the default applies)."""
    return list(sources) if sources else None


def say(message: str) -> None:
    click.echo(message, err=True)


def _verbose(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--verbose: every record of the toolkit on stderr (through tqdm, so a progress bar stays whole)."""
    if value:
        from runners.logs import attach

        attach(_TqdmHandler())


def _log_file(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        from runners.logs import attach

        try:
            attach(logging.FileHandler(value, encoding="utf-8"))
        except OSError as exc:
            raise BadInput(f"cannot write the log file {value}: {exc.strerror or exc}") from None


class _TqdmHandler(logging.Handler):
    """Writes records through tqdm.write, so they appear above a live progress bar, not through it."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


def logging_options(command: click.Command) -> None:
    """--verbose and --log-file on a command and every subcommand (a run folder always keeps run.log)."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            logging_options(sub)
        return
    command.params.append(click.Option(["--verbose", "-v"], is_flag=True, expose_value=False, callback=_verbose,
                                       help="Log every step (model calls, evaluations, units) on stderr."))
    command.params.append(click.Option(["--log-file"], type=click.Path(path_type=Path, dir_okay=False),
                                       expose_value=False, callback=_log_file,
                                       help="Also append the log to this file (runs always keep RUN_DIR/run.log) "
                                            "[default: none]."))
