"""The job channel's records (judge/job.py): what the pool sends a judge worker and what it
answers, typed on both sides, a malformed line refused with a one-line reason."""

from __future__ import annotations

import json

import pytest

from judge.job import INTERNAL_TESTS, Job, JobError, JobReply


def test_a_job_survives_its_json_line_and_keeps_its_defaults() -> None:
    job = Job("softmax", "src", case_set="visible", timing=True, timing_policy={"protocol": "final-full"},
              references=({"k": 1},), prime_references=True)
    back = Job.from_json(json.loads(json.dumps(job.to_json())))
    assert back == job
    assert Job.from_json({"task": "t", "source": "s"}) == Job("t", "s")
    assert Job("t", "s").with_(alone=True).alone and not Job("t", "s").alone
    assert Job("t", "s", kind=INTERNAL_TESTS).tests_job


@pytest.mark.parametrize("line, why", [
    ({"source": "s"}, "without task"),
    ({"task": "t", "source": "s", "case_sets": "hidden"}, r"unknown field\(s\) case_sets"),
    ({"task": "t", "source": "s", "timing": "yes"}, "timing is a str"),
    ({"task": "t", "source": "s", "timeout": True}, "timeout is a bool"),
    ({"task": "t", "source": "s", "kind": "benchmark"}, "unknown kind"),
    (["task", "t"], "not an object"),
])
def test_a_malformed_job_is_refused_with_its_reason(line: object, why: str) -> None:
    with pytest.raises(JobError, match=why):
        Job.from_json(line)


def test_a_reply_survives_its_json_line_and_a_malformed_one_is_refused() -> None:
    reply = JobReply(3, "n", {"verdict": {"kind": "correct"}}, fatal=True, restart_reason="device error",
                     references=({"r": 1},))
    assert JobReply.from_json(json.loads(json.dumps(reply.to_json()))) == reply
    with pytest.raises(JobError, match="without evaluation"):
        JobReply.from_json({"id": 3, "nonce": "n"})
    with pytest.raises(JobError, match="evaluation is a list"):
        JobReply.from_json({"id": 3, "nonce": "n", "evaluation": []})
