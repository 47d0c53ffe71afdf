"""The real OpenAI-SDK client against serve-sim on loopback: retries, timeouts, token usage,
sample indices, the start-up reachability check, and the concurrency cap."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bench.registry import get_task
from methods.templates import answer_request, render, system_prompt, task_block
from modelio.ledger import Ledger, ModelCallFailed
from modelio.openai_client import EndpointCallFailed, EndpointUnreachable, OpenAIClient
from modelio.server import ServerOptions, SimServer, request_from_body
from modelio.simulated import SimulatedModel
from modelio.tokens import count_tokens
from modelio.types import Message, Request
from record.store import Store


def direct_prompt(task_id: str = "vector_add") -> tuple[Message, ...]:
    task = get_task(task_id).view()
    return (Message("system", system_prompt("nvidia", True)),
            Message("user", render("direct_generate", task=task_block(task, True), oneshot="", answer=answer_request("fenced"))))


def fast_client(server: SimServer, **kw: object) -> OpenAIClient:
    opts: dict[str, object] = {"timeout_s": 5.0, "max_retries": 5, "backoff_initial_s": 0.02, "backoff_max_s": 0.2}
    opts.update(kw)
    return OpenAIClient(server.url, "sim", **opts)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # seconds: the fast subset stays under two minutes
def test_injected_429_500_drop_and_timeout_are_retried_and_the_call_completes() -> None:
    script = ("429", "500", "drop", "timeout")
    with SimServer(options=ServerOptions(fault_script=script, stall_s=2.0)) as server:
        client = fast_client(server, timeout_s=0.5)
        request = Request(messages=direct_prompt(), temperature=1.0, seed=11, sample_index=2)
        completion = client.complete(request)
        counters = server.counters()
    assert completion.retries == 4
    assert counters.chat_requests == 5 and counters.faults == {"429": 1, "500": 1, "drop": 1, "timeout": 1}
    stats = client.stats()
    assert stats.retries == 4 and stats.calls == 1 and stats.failed_calls == 0
    assert stats.retries_by_kind == {"429": 1, "5xx": 1, "connection": 1, "timeout": 1}
    # The answer is the one the in-process simulated model gives for the same request.
    local = SimulatedModel().complete(request)
    assert completion.text == local.text
    assert (completion.prompt_tokens, completion.completion_tokens) == (local.prompt_tokens, local.completion_tokens)


def test_retries_exhausted_fail_with_the_count_and_the_ledger_records_without_charging(tmp_path) -> None:
    with SimServer(options=ServerOptions(fault_script=("500",) * 3)) as server:
        client = fast_client(server, max_retries=2)
        store = Store(tmp_path / "store.sqlite")
        ledger = Ledger(client, store, budget=5)
        account = ledger.account("direct", "vector_add", 0)
        with pytest.raises(ModelCallFailed, match="after 2 retries"):
            account.complete(direct_prompt(), temperature=1.0, role="generator")
        assert server.counters().chat_requests == 3
    row = dict(store.query("SELECT * FROM calls")[0])
    assert row["error"].startswith("EndpointCallFailed") and row["retries"] == 2
    assert row["charged"] == 0 and account.spend.calls == 0  # no tokens were produced: not charged by default
    assert ledger.totals().failed_calls == 1 and ledger.totals().retries == 2


def test_charge_failed_calls_option_charges_a_failed_call(tmp_path) -> None:
    with SimServer(options=ServerOptions(fault_script=("429",) * 2)) as server:
        ledger = Ledger(fast_client(server, max_retries=1), Store(tmp_path / "s.sqlite"), budget=5,
                        charge_failed_calls=True)
        account = ledger.account("direct", "vector_add", 0)
        with pytest.raises(ModelCallFailed):
            account.complete(direct_prompt(), temperature=1.0, role="generator")
    assert account.spend.calls == 1 and account.remaining() == 4


def test_a_non_retryable_error_fails_at_once() -> None:
    with SimServer() as server:
        client = fast_client(server)
        bad = Request(messages=direct_prompt(), temperature=1.0, max_tokens=0)  # the server answers 400
        with pytest.raises(EndpointCallFailed, match="without retry") as info:
            client.complete(bad)
        assert info.value.retries == 0 and info.value.kind == "400"
        assert server.counters().chat_requests == 1


def test_random_faults_at_a_30_percent_rate_all_complete() -> None:
    with SimServer(options=ServerOptions(fail_rate=0.3, seed=3)) as server:
        client = fast_client(server, max_retries=10)
        results = [client.complete(Request(messages=direct_prompt(), temperature=1.0, seed=1, sample_index=i))
                   for i in range(12)]
        counters = server.counters()
    assert len(results) == 12 and all(r.text for r in results)
    faults = sum(counters.faults.values())
    assert faults > 0 and counters.chat_requests == 12 + faults
    assert sum(r.retries for r in results) == faults == client.stats().retries


def test_usage_is_counted_with_the_tokenizer_when_the_endpoint_omits_it() -> None:
    with SimServer(options=ServerOptions(include_usage=False)) as server:
        request = Request(messages=direct_prompt(), temperature=1.0, seed=5)
        completion = fast_client(server).complete(request)
    assert completion.prompt_tokens == count_tokens(request.prompt_text())
    assert completion.completion_tokens == count_tokens(completion.text)


def test_sample_index_and_seed_travel_so_distinct_samples_stay_distinct() -> None:
    with SimServer() as server:
        client = fast_client(server)
        kwargs = client.request_kwargs(Request(messages=direct_prompt(), seed=100, sample_index=7))
        assert kwargs["seed"] == 107 and kwargs["user"] == "kmc-sample-7"
        assert request_from_body(kwargs).seed == 100 and request_from_body(kwargs).sample_index == 7
        texts = {client.complete(Request(messages=direct_prompt(), temperature=1.0, seed=100, sample_index=i)).text
                 for i in range(6)}
        again = client.complete(Request(messages=direct_prompt(), temperature=1.0, seed=100, sample_index=0)).text
    assert len(texts) > 1  # the simulated model draws a different sample per index
    assert again in texts  # and the same index gives the same answer


def test_reachability_check_learns_the_endpoint_is_simulated() -> None:
    with SimServer() as server:
        client = fast_client(server)
        assert client.simulated is False
        client.check_reachable()
        assert client.simulated is True


def test_unreachable_endpoint_fails_fast_with_one_line_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    client = OpenAIClient(url, "some-model", timeout_s=5.0)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable) as info:
        client.check_reachable()
    assert time.monotonic() - started < 3.0
    message = str(info.value)
    assert url in message and "\n" not in message


def test_max_concurrency_caps_requests_in_flight() -> None:
    with SimServer(options=ServerOptions(latency_s=0.2)) as server:
        client = fast_client(server, max_concurrency=3)
        threads = [threading.Thread(target=client.complete,
                                    args=(Request(messages=direct_prompt(), seed=1, sample_index=i),))
                   for i in range(9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counters = server.counters()
    assert counters.answered == 9
    assert counters.max_in_flight == 3


def test_a_reply_cap_the_endpoint_wants_as_max_completion_tokens_is_sent_so_from_then_on() -> None:
    """OpenAI's reasoning models answer 400 to `max_tokens`: the call is sent again at once with
    the same cap as `max_completion_tokens` (no retry counted, nothing charged twice), and later
    calls send it so; the endpoint honours the cap either way."""
    request = Request(messages=direct_prompt(), temperature=1.0, seed=4, max_tokens=20)
    with SimServer() as plain:
        expected = fast_client(plain).complete(request)
    with SimServer(options=ServerOptions(reject_max_tokens=True)) as server:
        client = fast_client(server)
        assert client.request_kwargs(request)["max_tokens"] == 20
        first = client.complete(request)
        assert server.counters().chat_requests == 2 and server.counters().faults == {"400": 1}
        second = client.complete(request)
        assert server.counters().chat_requests == 3  # no 400 this time
        kwargs = client.request_kwargs(request)
        unbounded = client.request_kwargs(Request(messages=direct_prompt()))
    assert "max_tokens" not in kwargs and kwargs["max_completion_tokens"] == 20
    assert "max_completion_tokens" not in unbounded
    assert first.text == second.text == expected.text and first.completion_tokens == expected.completion_tokens <= 20
    assert first.retries == second.retries == 0
    stats = client.stats()
    assert stats.calls == 2 and stats.retries == 0 and stats.token_cap_field == "max_completion_tokens"


def test_a_400_about_another_parameter_still_fails_at_once() -> None:
    with SimServer(options=ServerOptions(reject_max_tokens=True)) as server:
        client = fast_client(server)
        with pytest.raises(EndpointCallFailed, match="max_tokens must be at least 1"):
            client.complete(Request(messages=direct_prompt(), temperature=1.0, max_tokens=0))
        assert server.counters().chat_requests == 2  # the rename, then the server's own 400
        assert client.stats().failed_calls == 1


def test_optional_fields_a_strict_endpoint_refuses_are_dropped_from_then_on(caplog: pytest.LogCaptureFixture) -> None:
    """A server that answers 422 "extra inputs are not permitted" for `seed` and `user` (as
    Mistral's does): the first call is sent again without each in turn, later calls go without
    both, the run's log says so once per field, and nothing else is ever dropped."""
    request = Request(messages=direct_prompt(), temperature=1.0, seed=3, max_tokens=50)
    with SimServer(options=ServerOptions(refuse_fields=("seed", "user"))) as server:
        client = fast_client(server)
        with caplog.at_level("WARNING", logger="kmc.modelio"):
            first = client.complete(request)
            assert server.counters().chat_requests == 3 and server.counters().faults == {"422": 2}
            second = client.complete(request)
        assert server.counters().chat_requests == 4
        kwargs = client.request_kwargs(request)
    assert first.text and second.text and first.retries == second.retries == 0
    assert "seed" not in kwargs and "user" not in kwargs and kwargs["max_tokens"] == 50
    assert client.stats().dropped_fields == ("seed", "user") and client.stats().calls == 2
    warned = [r.getMessage() for r in caplog.records if r.name == "kmc.modelio"]
    assert len(warned) == 2 and "'seed'" in warned[0] and "cannot be drawn again by seed" in warned[0]
    assert "Extra inputs are not permitted" in warned[1]  # the server's own words, from its 422 detail


@pytest.mark.parametrize("said, name, refused", [
    ("HTTP 400: Unsupported parameter: 'seed' is not supported with this model.", "seed", True),
    ("HTTP 422: Error code: 422 - {'detail': [{'type': 'extra_forbidden', 'loc': ['body', 'user'], "
     "'msg': 'Extra inputs are not permitted'}]}", "user", True),
    ('HTTP 400: Invalid JSON payload received. Unknown name "seed": Cannot find field.', "seed", True),
    ("HTTP 400: the last message must have role 'user'", "user", False),  # a role, not the field
    ("HTTP 400: Unsupported value: 'temperature' does not support 0.0 with this model.", "seed", False),
    ("HTTP 400: This model's maximum context length is 8192 tokens", "user", False),
])
def test_a_refusal_names_the_field_quoted(said: str, name: str, refused: bool) -> None:
    from modelio.openai_client import refuses_field

    assert refuses_field(said, name) is refused


def test_a_reply_in_parts_is_joined_and_an_error_in_a_200_body_is_quoted() -> None:
    """Replies as some servers shape them, read without a network: content as a list of parts,
    no content at all, and a 200 whose body carries an error instead of choices."""
    from types import SimpleNamespace

    from modelio.openai_client import reply_text

    parts = SimpleNamespace(content=[{"type": "text", "text": "def f"}, {"type": "image_url"}, {"type": "text", "text": "(): pass"}])
    assert reply_text(parts) == "def f(): pass"
    assert reply_text(SimpleNamespace(content=None, refusal="no")) == "" and reply_text(None) == ""
    client = OpenAIClient("http://127.0.0.1:9/v1", "m")
    usage = SimpleNamespace(prompt_tokens=3, completion_tokens=4)
    done = client._completion(Request(messages=direct_prompt()),
                              SimpleNamespace(choices=[SimpleNamespace(message=parts)], usage=usage), 0, 0.1)
    assert done.text == "def f(): pass" and done.completion_tokens == 4
    body_error = SimpleNamespace(choices=None, model_extra={"error": {"message": "upstream model overloaded"}})
    with pytest.raises(EndpointCallFailed, match="returned no choices: upstream model overloaded") as info:
        client._completion(Request(messages=direct_prompt()), body_error, 0, 0.1)
    assert info.value.kind == "empty" and client.stats().failed_calls == 1


def test_http_400s_fail_at_once_with_the_servers_message() -> None:
    """An endpoint that rejects JSON mode, and one that rejects every 3rd request as too long:
    the call fails without retry, and its error names the status and quotes the server."""
    with SimServer(options=ServerOptions(reject_json_mode=True)) as server:
        client = fast_client(server)
        client.complete(Request(messages=direct_prompt(), temperature=1.0))  # plain requests are answered
        with pytest.raises(EndpointCallFailed) as info:
            client.complete(Request(messages=direct_prompt(), temperature=1.0, json_mode=True))
        assert info.value.kind == "400" and info.value.retries == 0
        assert "HTTP 400: response_format of type json_object is not supported" in str(info.value)
    with SimServer(options=ServerOptions(reject_every=3)) as server:
        client = fast_client(server)
        outcomes = []
        for _ in range(6):
            try:
                client.complete(Request(messages=direct_prompt(), temperature=1.0))
                outcomes.append("ok")
            except EndpointCallFailed as exc:
                assert "HTTP 400: This model's maximum context length is 8192 tokens" in str(exc)
                outcomes.append("400")
        assert outcomes == ["ok", "ok", "400", "ok", "ok", "400"]
        assert server.counters().faults == {"400": 2}
    with pytest.raises(ValueError, match="reject_every"):
        ServerOptions(reject_every=-1)
