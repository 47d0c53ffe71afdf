"""A method plugin with a bug: on the task named by `fail_on` it submits one candidate and then
raises, as a plugin with a bug does (ZeroDivisionError); with `raise_kind="replay_miss"` it
raises instead the error a replay that misses raises (modelio.replay.ReplayMiss), which must
still stop the whole run. On other tasks it samples like direct until the budget is spent.
Used by tests/test_method_errors.py."""

from __future__ import annotations

from bench.task import TaskView
from methods.base import MethodContext
from methods.extract import extract_code
from methods.registry import register_method
from methods.templates import answer_request, render, system_prompt, task_block
from modelio.replay import ReplayMiss
from modelio.types import Message


@register_method("raises_on_a_task")
class RaisesOnATask:
    def __init__(self, fail_on: str = "softmax", raise_kind: str = "bug"):
        self.fail_on = fail_on
        self.raise_kind = raise_kind

    def run(self, task: TaskView, ctx: MethodContext) -> None:
        messages = [Message("system", system_prompt(ctx.vendor, True)),
                    Message("user", render("direct_generate", task=task_block(task, True), oneshot="",
                                           answer=answer_request(ctx.answer_format)))]
        while True:
            reply = ctx.ask(messages, temperature=1.0, role="sample", wants_code=True)
            code = extract_code(reply.text)
            if code:
                ctx.submit(ctx.propose(code))
            if task.id == self.fail_on:
                if self.raise_kind == "replay_miss":
                    raise ReplayMiss("the recorded run has no answer for this call")
                print(1 / 0)
