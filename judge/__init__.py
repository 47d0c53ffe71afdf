"""The judging side and the candidate's process, never the same process.

The judge (`python -m judge.worker`) judges (oracle), times (timing) and reads clocks; each
candidate runs in a fresh, sandboxed process forked from a warm template (template, sandbox,
containment), which runs only the candidate side: the package `judge.candidate`, which imports
nothing of the judge side. It never imports the parent-side scheduler (`runners`).
"""
