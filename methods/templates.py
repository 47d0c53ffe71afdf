"""Prompt templates: one text file per role (and per target vendor for the knowledge prompt)
under methods/prompts/, filled with string.Template so braces in code need no escaping.

Context switches shared by every method: `knowledge` (the vendor's hardware rules as the
system prompt, and the exact signature in the task block; off: a plain system prompt and
only the entry point's name) and `oneshot` (an example program from `ctx.example`, which the
scheduler has already cleared of near-copies of the task's answer).

One output contract: every prompt that asks for code ends with `answer_request(format, what)`,
the same words for every method ("fenced": one ```python block; "json": GEAK-v1's JSON object
{"thought", "code"}), so no method's replies are parsed under easier rules than another's.
tests/snapshots/ holds every role's rendered prompt for each vendor; a test keeps them current."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

from bench.task import TaskView

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@cache
def _template(name: str) -> Template:
    return Template((PROMPTS_DIR / f"{name}.txt").read_text())


def render(name: str, **values: str) -> str:
    return _template(name).substitute(**values).strip() + "\n"


def system_prompt(vendor: str, knowledge: bool) -> str:
    """The knowledge prompt for the detected target; the CPU interpreter is judged with the
    NVIDIA rules, since the kernels it checks are meant for CUDA-style GPUs."""
    if not knowledge:
        return render("system_plain")
    return render("knowledge_amd" if vendor == "amd" else "knowledge_nvidia")


ANSWER_FORMATS = ("fenced", "json")
# Reply caps (`max_tokens`) as GEAK-v1 sent them: 15000 for the generator (OptimAgent), 5000
# for every other call (its OpenAI client's default, which the reflector used). Every built-in
# method takes them as its defaults for code-writing and prose calls; the ledger sends the
# smaller of the cap and what a token budget has left.
CODE_MAX_TOKENS = 15000
TEXT_MAX_TOKENS = 5000


def answer_request(answer_format: str, what: str = "the complete module") -> str:
    """The one sentence every code-writing prompt ends with (`what`: the module, or the tests)."""
    if answer_format == "json":
        return render("answer_json", what=what).strip()
    if answer_format == "fenced":
        return render("answer_fenced", what=what).strip()
    raise ValueError(f"answer format must be fenced or json, not {answer_format!r}")


def fenced(code: str) -> str:
    """Code as one ```python block (the form every prompt shows code in)."""
    return f"```python\n{code.rstrip()}\n```"


def oneshot_block(example: str | None) -> str:
    """The retrieved example as a prompt paragraph, or nothing (`oneshot` off, empty corpus).
    Only the code is shown, not the other task's instruction, so the prompt states one task."""
    if not example:
        return ""
    return "\n" + render("oneshot", code=fenced(example))


def task_block(task: TaskView, knowledge: bool) -> str:
    signature = f"Implement exactly this signature:\n{task.signature}\n" if knowledge else \
        f"The entry point is the Python function `{task.entry_point}`.\n"
    cases = "\n".join(f"- {c}" for c in task.visible_cases)
    return render("task", instruction=task.instruction, signature_block=signature, visible_cases=cases).rstrip("\n")
