"""The record of a run: what is kept, where, and how it is read back.

Every layer reads a run through this package and nothing else; it imports nothing of the
toolkit (the standard library only), so it sits at the bottom, beside stats/.

- store.py: the run store, one SQLite file written as things happen; all SQL of the project
  is in this package (here and recorded.py).
- run_folder.py: the run folder's layout and its JSON files (config.json, env.json,
  summary.json), read and written through `RunFolder` only.
- provenance.py: what code and which command produced a run (env.json's git revision,
  package versions, command line) and the version labels replay and `--version` print.
- progress.py: how much of a run is done (units finished out of units planned).
- recorded.py: a recorded run's calls and evaluations, read back once for a replay.
- read_only.py: opening a store without changing it or its folder.
"""
