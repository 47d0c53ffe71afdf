"""The worker side: code that runs in the evaluation worker process, beside candidate code.

It judges (oracle), times (timing), contains (sandbox, privileges) and reads clocks; it
never imports the parent-side scheduler (`runners`), which starts it as `python -m judge.worker`.
"""
