"""The simulated model: writes real Triton source by mutating a task's expert kernel.

It exists so that the main job runs offline and so the statistics can be validated end to
end: its rates are parameters, so the true probability that a fresh sample is correct is
known (`fresh_success_probability`). It reads the prompt the way a model would be expected
to: shown an error trace or a reflection next to earlier code, it is more likely to undo the
mutation behind the failure; shown latencies and asked to optimise, it is more likely to try
a tuning change. Output is a pure function of (seed, prompt, sample index) — and of the
prompt alone at temperature 0 — so runs, resumes and replays are reproducible.

How it reads a prompt: the *ask* is the last paragraph of the last message (every prompt
under methods/prompts/ ends with it). "Write N unit tests" gets test functions; "reflect on /
what went wrong / optimisation strategy / do not write code" gets prose; anything else gets
code. The task is found from the text outside code blocks (so a one-shot example of another
task is never mistaken for the task), the earlier code is the last block in the last message
that defines the entry point, and failure or speed requests are read from that message's
prose, never from the system prompt.

Internal unit tests (Reflexion's faithful mode): small random inputs on `DEVICE`, the
entry point called, and the result compared with the task's reference written as a PyTorch
expression. Each test is wrong with probability `p_wrong_test` (it asserts a slightly
scaled expected value, so a correct kernel fails it), and small sizes miss bugs that only
show on long rows or large values, so self-written tests give both false negatives and
false positives, as in the Reflexion paper.

Everything it produces is labelled simulated by the callers (invariant 7); it never claims
to be a real model.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from bench.registry import all_tasks
from bench.task import Case, Mutation, Task
from modelio.tokens import count_tokens
from modelio.types import Completion, Message, Request

SIM_MODEL_NAME = "simulated-kernel-writer-v1"

_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
_ANY_BLOCK = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)
_FEEDBACK_WORDS = ("error", "traceback", "failed", "wrong", "mismatch", "incorrect", "exception", "assert")
_OPTIMISE_WORDS = ("faster", "optimi", "speed up", "speedup")
_TESTS_ASK = re.compile(r"\bwrite (\d+) unit tests?\b", re.IGNORECASE)
_PROSE_ASK = re.compile(r"\breflect on\b|\bwhat went wrong\b|\boptimi[sz]ation strategy\b|\bdo not write code\b",
                        re.IGNORECASE)
_TEST_SIZES = (1, 3, 7, 16, 33, 65, 100, 257)
# Opening words of methods/prompts/knowledge_*.txt and oneshot.txt (a test keeps them in step).
KNOWLEDGE_MARK = "Rules for the code you write:"
ONESHOT_MARK = "Here is an example Triton program"


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
    p_diagnose: asked to reflect on buggy code after a failure, the chance the reflection names
        the bug (quoting the faulty line and its fix).
    p_fix_named: shown feedback *and* a reflection that names the bug, the chance it is undone
        (higher than p_fix: a reflection helps only when it is right).
    p_wrong_test: asked for unit tests, the chance each test asserts a slightly wrong value.
    p_test_without_assert: the chance a test checks nothing (the AST filter drops it).
    bonus_knowledge / bonus_oneshot: added to p_clean when the prompt carries the vendor's
        hardware rules (the `knowledge` system prompt) / a retrieved example program
        (`oneshot`), so ablating either changes simulated results the way the GEAK paper
        reports context helping; the sum is capped at 0.95. Invented magnitudes, like every
        rate here: they exercise the ablation plumbing and say nothing about a real model.
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
    p_diagnose: float = 0.7
    p_fix_named: float = 0.7
    p_wrong_test: float = 0.1
    p_test_without_assert: float = 0.05
    bonus_knowledge: float = 0.05
    bonus_oneshot: float = 0.10


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
    def fresh_success_probability(self, task: Task, knowledge: bool = False, oneshot: bool = False) -> float:
        """P(a fresh sample passes the hidden cases): every task bug is breaking (a test checks)."""
        p = self.params
        base = p.p_clean_by_difficulty.get(task.difficulty, 0.1)
        return min(0.95, base + (p.bonus_knowledge if knowledge else 0.0) + (p.bonus_oneshot if oneshot else 0.0))

    # ------------------------------------------------------------------ protocol
    @staticmethod
    def count_prompt_tokens(messages: tuple[Message, ...]) -> int:
        """Exactly the prompt tokens `complete` will report (the ledger counts before sending)."""
        return count_tokens("\n\n".join(m.content for m in messages))

    def complete(self, request: Request) -> Completion:
        rng = random.Random(self._rng_seed(request))
        last = request.messages[-1].content if request.messages else ""
        ask = _final_paragraph(last)
        task = self._find_task(request)
        tests = _TESTS_ASK.search(ask)
        if tests and task is not None:
            return self._completion(request, self._write_tests(task, int(tests.group(1)), rng))
        if _PROSE_ASK.search(ask):
            return self._completion(request, self._reflect(task, last, ask, rng))
        if task is None:
            text = "I could not identify the requested kernel.\n```python\nraise NotImplementedError('unknown task')\n```"
            return self._completion(request, text)
        code, thought = self._write_code(task, last, ask, rng, _context(request))
        if request.json_mode or re.search(r'json.*"thought".*"code"|"code".*json', ask, re.IGNORECASE | re.DOTALL):
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

    def _find_task(self, request: Request) -> Task | None:
        """By the signature or instruction in the prose; else by the entry point a code block
        in the last message defines (a reflection prompt shows only code); else by a call."""
        tasks = self._tasks if self._tasks is not None else all_tasks()
        prose = _ANY_BLOCK.sub("", request.prompt_text())
        for task in tasks:
            if task.signature in prose or task.instruction in prose:
                return task
        last = request.messages[-1].content if request.messages else ""
        for task in tasks:
            if any(_defines(b, task.entry_point) for b in _CODE_BLOCK.findall(last)):
                return task
        for task in tasks:
            if re.search(rf"\b{re.escape(task.entry_point)}\s*\(", prose):
                return task
        return None

    # ------------------------------------------------------------------ code
    def _bugs(self, task: Task, source: str) -> list[Mutation]:
        return [m for m in task.mutations if m.breaks] + generic_mutations(source)

    def _fresh(self, task: Task, rng: random.Random, context: tuple[bool, bool]) -> tuple[str, str]:
        p = self.params
        code = task.baseline_source()
        tunings = [m for m in task.mutations if not m.breaks]
        if rng.random() < self.fresh_success_probability(task, *context):
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

    def _write_code(self, task: Task, last: str, ask: str, rng: random.Random,
                    context: tuple[bool, bool]) -> tuple[str, str]:
        p = self.params
        blocks = [b for b in _CODE_BLOCK.findall(last) if _defines(b, task.entry_point)]
        if not blocks:
            return self._fresh(task, rng, context)
        previous = blocks[-1]
        prose = _ANY_BLOCK.sub("", last).lower()
        bugs = [m for m in self._bugs(task, task.baseline_source()) if _has(previous, m)]
        wants_speed = any(w in ask.lower() for w in _OPTIMISE_WORDS)
        saw_failure = any(w in prose for w in _FEEDBACK_WORDS)
        if bugs and saw_failure:
            named = _names_bug(last, bugs[0])
            if rng.random() < (p.p_fix_named if named else p.p_fix):
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
        return self._fresh(task, rng, context)

    # ------------------------------------------------------------------ tests
    def _write_tests(self, task: Task, n: int, rng: random.Random) -> str:
        """`n` pytest-style tests on small random inputs, compared with the reference written
        as a PyTorch expression; some wrong (p_wrong_test), some asserting nothing. Tasks whose
        reference is not a self-contained one-line expression get shape-and-finiteness tests."""
        p = self.params
        ref = reference_expression(task)
        dtype = "float32" if "float32" in task.dtypes else task.dtypes[0]
        tol = "1e-4" if dtype in ("float32", "float64") else "1e-2"
        tests = []
        for i in range(max(1, min(n, 12))):
            sizes, args, out = self._small_inputs(task, dtype, i, rng)
            names = ref[0] if ref and len(ref[0]) == len(args) else [f"arg{j}" for j in range(len(args))]
            label = "_".join(f"{k}{v}" for k, v in sorted(sizes.items()))
            body = [f"def test_{task.entry_point}_{label}_{i}():", f"    torch.manual_seed({i})"]
            body += [f"    {name} = {_literal_input(a)}" for name, a in zip(names, args, strict=True)]
            body.append(f"    out = {task.entry_point}({', '.join(names)})")
            if rng.random() < p.p_test_without_assert:
                body.append("    print(out)")
            elif ref and len(ref[0]) == len(args) and _is_float_tensor(out):
                expected = ref[1]
                if rng.random() < p.p_wrong_test:
                    expected = f"({expected}) * {rng.choice((1.01, 1.02, 1.05))}"
                body += [f"    expected = {expected}", "    assert out.shape == expected.shape",
                         f"    assert torch.allclose(out, expected, atol={tol}, rtol={tol})"]
            elif ref and len(ref[0]) == len(args) and _is_tensor(out):
                body += [f"    expected = {ref[1]}", "    assert torch.equal(out, expected)"]
            elif _is_tensor(out):
                body += [f"    assert tuple(out.shape) == {tuple(out.shape)}", "    assert torch.isfinite(out.float()).all()"]
            else:
                body.append("    assert out is not None")
            tests.append("\n".join(body))
        code = "import torch\n\n\n" + "\n\n\n".join(tests) + "\n"
        return f"Here are unit tests for `{task.entry_point}`.\n\n```python\n{code}```\n"

    @staticmethod
    def _small_inputs(task: Task, dtype: str, seed: int, rng: random.Random) -> tuple[dict[str, int], tuple, Any]:
        """Random small sizes (capped by a visible case's) that the task's own input maker and
        reference accept; after a few refusals, the visible case's sizes themselves."""
        base = rng.choice(task.visible)
        for _ in range(6):
            sizes = {k: min(v, rng.choice(_TEST_SIZES)) for k, v in base.dims.items()}
            total = 1
            for v in sizes.values():
                total *= v
            if total > 1 << 16:
                continue
            case = Case(f"sim-test-{seed}", tuple(sorted(sizes.items())), dtype, seed=seed)
            try:
                args = task.make_inputs(case, "cpu")
                return sizes, args, task.reference(*args)
            except Exception:  # noqa: BLE001 - sizes the task does not accept: draw again
                continue
        case = Case(f"sim-test-{seed}", base.sizes, dtype, seed=seed)
        args = task.make_inputs(case, "cpu")
        return base.dims, args, task.reference(*args)

    # ------------------------------------------------------------------ prose
    def _reflect(self, task: Task | None, last: str, ask: str, rng: random.Random) -> str:
        if re.search(r"optimi[sz]ation strategy|faster", ask, re.IGNORECASE):
            return ("Analysis: the kernel is memory-bound; larger blocks and more warps per program could raise "
                    "memory throughput. Strategy: autotune BLOCK_SIZE and num_warps, keep loads coalesced.")
        blocks = [b for b in _CODE_BLOCK.findall(last) if task is not None and _defines(b, task.entry_point)]
        prose = _ANY_BLOCK.sub("", last).lower()
        if task is not None and blocks and any(w in prose for w in _FEEDBACK_WORDS):
            bugs = [m for m in self._bugs(task, task.baseline_source()) if _has(blocks[-1], m)]
            if bugs and rng.random() < self.params.p_diagnose:
                return (f"Reflection: the implementation has a {bugs[0].kind.replace('_', ' ')} problem "
                        f"around `{bugs[0].replace.strip()[:80]}`; it should be `{bugs[0].find.strip()[:80]}`.")
        return "Reflection: the failure suggests an indexing or masking mistake at block boundaries."


# ---------------------------------------------------------------------- prompt reading helpers


def _context(request: Request) -> tuple[bool, bool]:
    """(knowledge, oneshot): whether the system prompt carries the hardware rules, and whether
    any message shows a retrieved example program."""
    system = " ".join(m.content for m in request.messages if m.role == "system")
    return KNOWLEDGE_MARK in system, any(ONESHOT_MARK in m.content for m in request.messages)


def _final_paragraph(text: str) -> str:
    """The ask: what follows the last blank line outside code blocks."""
    masked = _ANY_BLOCK.sub(lambda m: "x" * len(m.group(0)), text.rstrip())
    cut = masked.rfind("\n\n")
    return text.rstrip()[cut + 2:] if cut >= 0 else text


def _defines(code: str, entry_point: str) -> bool:
    return re.search(rf"^def {re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def _names_bug(text: str, bug: Mutation) -> bool:
    """A reflection in the prompt that quotes the faulty line and its fix (as _reflect writes)."""
    return f"`{bug.find.strip()[:80]}`" in _ANY_BLOCK.sub("", text)


def reference_expression(task: Task) -> tuple[list[str], str] | None:
    """(parameter names, body) of a task reference written as a one-line lambda that uses only
    its parameters and `torch` (what a test can evaluate), else None."""
    try:
        source = inspect.getsource(task.reference)
    except (OSError, TypeError):
        return None
    text = source[source.find("lambda"):].strip() if "lambda" in source else ""
    while text:
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            text = text[:-1]
            continue
        if isinstance(node, ast.Tuple) and node.elts:
            node = node.elts[0]
        if not isinstance(node, ast.Lambda) or node.args.vararg or node.args.kwarg:
            return None
        params = [a.arg for a in node.args.args]
        free = {n.id for n in ast.walk(node.body) if isinstance(n, ast.Name)}
        if not free <= set(params) | {"torch"} | set(dir(__builtins__) if isinstance(__builtins__, dict) else dir(
                __builtins__)):
            return None
        return params, ast.unparse(node.body)
    return None


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _is_float_tensor(value: Any) -> bool:
    return _is_tensor(value) and value.is_floating_point()


def _literal_input(value: Any) -> str:
    """How a test author would build this argument: random values of its shape and dtype,
    in the range the task's inputs have (indices stay in bounds, positive inputs positive)."""
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        shape = tuple(value.shape)
        if value.numel() == 0:
            return f"torch.empty({shape}, dtype=torch.{dtype}, device=DEVICE)"
        if value.is_floating_point():
            lo = float(value.min())
            if lo >= 0:
                hi = max(float(value.max()), 1e-3)
                return f"torch.rand({shape}, dtype=torch.{dtype}, device=DEVICE) * {hi:.4g} + {lo:.4g}"
            return f"torch.randn({shape}, dtype=torch.{dtype}, device=DEVICE)"
        if value.dtype == torch.bool:
            return f"torch.rand({shape}, device=DEVICE) > 0.5"
        lo, hi = min(int(value.min()), 0), int(value.max())
        return f"torch.randint({lo}, {hi + 1}, {shape}, dtype=torch.{dtype}, device=DEVICE)"
    return repr(value)
