"""The simulated model: writes real Triton source by mutating a task's expert kernel.

It exists so that the main job runs offline and so the statistics can be validated end to
end: its rates are parameters, so the true probability that a fresh sample is correct is
known (`fresh_success_probability`). It reads the prompt the way a model would be expected
to: shown an error trace or a reflection next to earlier code, it is more likely to undo the
mutation behind the failure; shown latencies and asked to optimise, it is more likely to try
a tuning change. Output is a pure function of (seed, prompt, sample index) — and of the
prompt alone at temperature 0 — so runs, resumes and replays are reproducible.

Everything it produces is labelled simulated by the callers (invariant 7); it never claims
to be a real model.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field

from bench.registry import all_tasks
from bench.task import Mutation, Task
from llm.tokens import count_tokens
from llm.types import Completion, Request

SIM_MODEL_NAME = "simulated-kernel-writer-v1"

_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
_FEEDBACK_WORDS = ("error", "traceback", "failed", "wrong", "mismatch", "reflection", "incorrect", "exception")
_OPTIMISE_WORDS = ("faster", "optimi", "speed up", "latency", "speedup")


@dataclass(frozen=True)
class SimParams:
    """Documented defaults; every rate is a probability per call.

    p_clean_by_difficulty: chance a fresh sample is the expert kernel (possibly re-tuned);
        otherwise it carries exactly one bug.
    share_syntax / share_compile: of the buggy fresh samples, the share with a generic syntax
        or compile error; the rest get one of the task's own bugs.
    p_fix: shown feedback on buggy code, the chance the bug is undone.
    p_new_bug_on_repair: when not fixed, the chance a different bug is introduced instead.
    p_tune: asked to optimise correct code, the chance of a tuning change.
    p_break_on_tune: asked to optimise, the chance the new code gains a bug.
    p_tune_fresh: chance a clean fresh sample is also re-tuned.
    """

    p_clean_by_difficulty: dict[int, float] = field(
        default_factory=lambda: {1: 0.45, 2: 0.35, 3: 0.25, 4: 0.15, 5: 0.10})
    share_syntax: float = 0.15
    share_compile: float = 0.15
    p_fix: float = 0.5
    p_new_bug_on_repair: float = 0.3
    p_tune: float = 0.6
    p_break_on_tune: float = 0.15
    p_tune_fresh: float = 0.3


def generic_mutations(source: str) -> list[Mutation]:
    """Syntax and compile errors that apply to any kernel, with exact find/replace text."""
    out = []
    match = re.search(r"^(def \w+\(.*\).*):\s*$", source, re.MULTILINE)
    if match:
        out.append(Mutation("syntax_error", match.group(0), match.group(1)))
    if "tl.load(" in source:
        out.append(Mutation("compile_error", "tl.load(", "tl.load_tile(", note="no such triton.language op"))
    return out


def _has(code: str, m: Mutation) -> bool:
    return m.replace in code and (m.find not in code or m.find in m.replace)


def _apply(code: str, m: Mutation) -> str:
    return code.replace(m.find, m.replace, 1)


def _undo(code: str, m: Mutation) -> str:
    return code.replace(m.replace, m.find, 1)


class SimulatedModel:
    model = SIM_MODEL_NAME
    simulated = True

    def __init__(self, params: SimParams | None = None, tasks: list[Task] | None = None):
        self.params = params or SimParams()
        self._tasks = tasks

    # ------------------------------------------------------------------ ground truth
    def fresh_success_probability(self, task: Task) -> float:
        """P(a fresh sample passes the hidden cases): every task bug is breaking (a test checks)."""
        return self.params.p_clean_by_difficulty.get(task.difficulty, 0.1)

    # ------------------------------------------------------------------ protocol
    def complete(self, request: Request) -> Completion:
        prompt = request.prompt_text()
        rng = random.Random(self._rng_seed(request))
        last = request.messages[-1].content if request.messages else ""
        if re.search(r"\breflect|what went wrong", last, re.IGNORECASE):
            return self._completion(request, self._reflect(prompt, rng))
        task = self._find_task(prompt)
        if task is None:
            text = "I could not identify the requested kernel.\n```python\nraise NotImplementedError('unknown task')\n```"
            return self._completion(request, text)
        code, thought = self._write_code(task, prompt, rng)
        if request.json_mode or re.search(r'json.*"thought".*"code"|"code".*json', prompt, re.IGNORECASE | re.DOTALL):
            text = json.dumps({"thought": thought, "code": code})
        else:
            text = f"{thought}\n\n```python\n{code}```\n"
        return self._completion(request, text)

    def _completion(self, request: Request, text: str) -> Completion:
        if request.max_tokens is not None and count_tokens(text) > request.max_tokens:
            text = text[: request.max_tokens * 4]
        return Completion(text=text, prompt_tokens=count_tokens(request.prompt_text()),
                          completion_tokens=count_tokens(text), latency_s=0.0, cached=False, model=self.model)

    @staticmethod
    def _rng_seed(request: Request) -> int:
        sample = 0 if request.temperature == 0 else request.sample_index
        blob = f"{request.seed}|{sample}|{request.messages_hash()}".encode()
        return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")

    def _find_task(self, prompt: str) -> Task | None:
        tasks = self._tasks if self._tasks is not None else all_tasks()
        for task in tasks:
            if task.signature in prompt or task.instruction in prompt:
                return task
        for task in tasks:
            if re.search(rf"\b{re.escape(task.entry_point)}\s*\(", prompt):
                return task
        return None

    # ------------------------------------------------------------------ code
    def _bugs(self, task: Task, source: str) -> list[Mutation]:
        return [m for m in task.mutations if m.breaks] + generic_mutations(source)

    def _fresh(self, task: Task, rng: random.Random) -> tuple[str, str]:
        p = self.params
        code = task.baseline_source()
        tunings = [m for m in task.mutations if not m.breaks]
        if rng.random() < self.fresh_success_probability(task):
            if tunings and rng.random() < p.p_tune_fresh:
                code = _apply(code, rng.choice(tunings))
            return code, "Plan: one program per block, masked loads and stores, float32 accumulation."
        r = rng.random()
        generic = {m.kind: m for m in generic_mutations(code)}
        if r < p.share_syntax and "syntax_error" in generic:
            bug = generic["syntax_error"]
        elif r < p.share_syntax + p.share_compile and "compile_error" in generic:
            bug = generic["compile_error"]
        else:
            bug = rng.choice([m for m in task.mutations if m.breaks] or list(generic.values()))
        return _apply(code, bug), "Plan: tile the problem into blocks and launch one program per tile."

    def _write_code(self, task: Task, prompt: str, rng: random.Random) -> tuple[str, str]:
        p = self.params
        blocks = [b for b in _CODE_BLOCK.findall(prompt) if task.entry_point in b]
        lower = prompt.lower()
        if not blocks:
            return self._fresh(task, rng)
        previous = blocks[-1]
        bugs = [m for m in self._bugs(task, task.baseline_source()) if _has(previous, m)]
        wants_speed = any(w in lower for w in _OPTIMISE_WORDS)
        saw_failure = any(w in lower for w in _FEEDBACK_WORDS)
        if bugs and saw_failure:
            if rng.random() < p.p_fix:
                return _undo(previous, bugs[0]), f"The failure comes from a {bugs[0].kind.replace('_', ' ')}; fixed it."
            if rng.random() < p.p_new_bug_on_repair:
                others = [m for m in self._bugs(task, previous) if m.find in previous and not _has(previous, m)]
                if others:
                    return _apply(previous, rng.choice(others)), "Rewrote the indexing to address the error."
            return previous, "Adjusted the kernel; the logic should now be right."
        if wants_speed and not bugs:
            tunings = [m for m in task.mutations if not m.breaks and m.find in previous and not _has(previous, m)]
            code = previous
            if tunings and rng.random() < p.p_tune:
                code = _apply(code, rng.choice(tunings))
            if rng.random() < p.p_break_on_tune:
                options = [m for m in task.mutations if m.breaks and m.find in code]
                if options:
                    code = _apply(code, rng.choice(options))
            return code, "Retuned block size and warps to raise occupancy and memory throughput."
        if bugs:
            return previous, "The kernel looks right to me."
        return self._fresh(task, rng)

    # ------------------------------------------------------------------ prose
    def _reflect(self, prompt: str, rng: random.Random) -> str:
        task = self._find_task(prompt)
        blocks = _CODE_BLOCK.findall(prompt)
        if task is not None and blocks:
            bugs = [m for m in self._bugs(task, task.baseline_source()) if _has(blocks[-1], m)]
            if bugs and rng.random() < self.params.p_fix + 0.2:
                return (f"Reflection: the implementation has a {bugs[0].kind.replace('_', ' ')} problem "
                        f"around `{bugs[0].replace.strip()[:80]}`; it should be `{bugs[0].find.strip()[:80]}`.")
        return "Reflection: the failure suggests an indexing or masking mistake at block boundaries."
