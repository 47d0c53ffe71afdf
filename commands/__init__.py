"""The command line's commands, one module per command group (cli.py is the group and the entry
point): each command parses its options, calls one library function and prints what it returns.
common.py holds what several share: BadInput and the exit statuses, list parsing, the
`--source`, `--device` and `--unsandboxed` options and the logging options on every command."""
