"""The judging side and the candidate's process, never the same process.

The judge (`python -m judge.worker`) judges (oracle), times (timing) and reads clocks; each
candidate runs in a fresh, contained process forked from a warm template (template,
candidate, containment, launches). It never imports the parent-side scheduler (`runners`).
"""
