"""The larger seeded case sets a mutant is judged on beside the suite's tests and the hidden
cases: the stress set (ground truth, `STRESS_FACTOR` times the hidden cases) and the
differential set (`DIFFERENTIAL_FACTOR` times, run only to confirm that a mutant no judge
kills computes exactly what the expert kernel computes).

Why drawn from the task's own cases and not from a size grammar of our own: a task's cases
already encode its contract (which sizes go together, which dtypes and layouts it accepts);
a stress case keeps a case's size names and perturbs their values (off by one, doubled,
halved, another size the task uses), its dtype and layout drawn among the task's, under a
fresh seed. A drawn case the expert kernel does not pass is not a case (runners/strength.py
drops it): the contract is what the expert and the reference agree on. Adapted tasks (a
suite's recorded calls, `call`/`shape` slots) keep their sizes and get fresh value
permutations only: their sizes are the suite's, not ours to move.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from bench.task import Case, Task

STRESS_FACTOR = 3
"""Stress cases per hidden case (interpreter set)."""
DIFFERENTIAL_FACTOR = 5
"""Differential cases per hidden case, for the equivalence check of mutants no judge kills."""
SLOT_KEYS = frozenset({"call", "shape", "perf"})
"""Size names of adapted tasks that index recorded calls rather than measure a tensor."""


def _elements(c: Case) -> int:
    return math.prod(max(1, v) for _, v in c.sizes)


def _perturbed(value: int, seen: list[int], rng: random.Random) -> int:
    choices = [value, value + 1, max(1, value - 1), 2 * value, 2 * value + 1, max(1, value // 2 + 1),
               rng.choice(seen), rng.choice(seen) + 1, rng.randint(1, 2 * max(seen) + 1)]
    return rng.choice(choices)


def draw_cases(task: Task, count: int, seed: int, label: str, interpreter: bool = True) -> tuple[Case, ...]:
    """`count` seeded cases for `task` (names `<label>-<n>`). Sizes are capped at the element
    count of the task's largest hidden case, so a stress case costs what a hidden case does."""
    pool = [c for c in (*task.visible, *task.hidden(interpreter)) if c.dtype not in task.interpreter_skips
            or not interpreter]
    if not pool or count <= 0:
        return ()
    rng = random.Random(f"{seed}:{task.id}:{label}")
    dtypes = sorted({c.dtype for c in pool})
    layouts = sorted({c.layout for c in pool})
    seen: dict[str, list[int]] = {}
    for c in pool:
        for k, v in c.sizes:
            seen.setdefault(k, []).append(v)
    ceiling = max(_elements(c) for c in pool)
    cases: list[Case] = []
    for n in range(count):
        base = rng.choice(pool)
        fresh_seed = rng.randrange(10_000, 2**31)
        if any(k in SLOT_KEYS for k, _ in base.sizes):
            cases.append(replace(base, name=f"{label}-{n}", seed=fresh_seed))
            continue
        sizes = base.sizes
        for _ in range(20):
            sizes = tuple((k, _perturbed(v, seen[k], rng)) for k, v in base.sizes)
            if math.prod(max(1, v) for _, v in sizes) <= ceiling:
                break
        else:
            sizes = base.sizes
        cases.append(Case(f"{label}-{n}", sizes, rng.choice(dtypes), fresh_seed, rng.choice(layouts)))
    return tuple(cases)


def stress_cases(task: Task, seed: int, interpreter: bool = True, factor: int = STRESS_FACTOR) -> tuple[Case, ...]:
    """The ground-truth set before the expert filters it (runners/strength.py)."""
    return draw_cases(task, factor * len(task.hidden(interpreter)), seed, "stress", interpreter)


def differential_cases(task: Task, seed: int, interpreter: bool = True,
                       factor: int = DIFFERENTIAL_FACTOR) -> tuple[Case, ...]:
    """A larger set under another label (so other draws), for the bit-for-bit comparison."""
    return draw_cases(task, factor * len(task.hidden(interpreter)), seed, "differential", interpreter)
