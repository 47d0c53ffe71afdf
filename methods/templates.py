"""Prompt templates: one text file per role (and per target vendor for the knowledge prompt)
under methods/prompts/, filled with string.Template so braces in code need no escaping."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

from bench.task import TaskView

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@lru_cache(maxsize=None)
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


def task_block(task: TaskView, knowledge: bool) -> str:
    signature = f"Implement exactly this signature:\n{task.signature}\n" if knowledge else \
        f"The entry point is the Python function `{task.entry_point}`.\n"
    cases = "\n".join(f"- {c}" for c in task.visible_cases)
    return render("task", instruction=task.instruction, signature_block=signature, visible_cases=cases)
