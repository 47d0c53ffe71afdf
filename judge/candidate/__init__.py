"""The candidate side: the code a candidate's process runs to run candidate code, and the records
it shares with the judge. Nothing here may import the judge side (references, expected outputs,
tolerances, case generation, comparison, the judge's processes): an import-linter contract in
pyproject.toml forbids it, so none of those is in a candidate's memory to read or patch.

- `server`: the candidate process's message loop (`serve_candidate`): loads the candidate, runs
  its entry point on the inputs the judge sends, hands back plain outputs and what it saw;
- `loading`: the process made ready, a candidate imported from its file, what it raised
  classified; `allocations`: poisoned allocations and guard bytes; `interpreter_support`: what
  the CPU interpreter lacks that a correct kernel may use;
- `launches`: the recorders of a call (Triton launches, PyTorch operations, which memory kernels
  wrote); `call_record`: what they recorded and what is read from it after the call;
  `known_memory`: where a launch's tensors came from, and the seals on known memory;
  `launchers`: Triton's C launchers, noted here, built by the judge;
- `internal_tests`: a method's own tests; `sampling`: timing samples of one function;
- shared with the judge: `wire` (the conversation), `verdict` (the records), `reruns` (a failure
  judged again with memory disturbed), `value_text` (how feedback quotes a value), `tracebacks`
  (the candidate's own frames), `bit_equality` (tensors compared by their bits).

Every module of this package is imported by the warm template before the project leaves the
import path (judge/template.py `_CANDIDATE_SIDE`); judge/sandbox.py, judge/sandbox_layout.py,
judge/containment.py and judge/relay.py, which build the boundary from outside, are imported with
them and held to the same contract.
"""
