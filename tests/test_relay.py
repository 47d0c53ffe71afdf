"""The template's relay of candidates' stderr keeps each one's last lines for its verdict
(judge/relay.py `tail`): the exit status alone does not say why a process ended."""

from __future__ import annotations

import os

from judge.candidate.verdict import Verdict
from judge.relay import ENDED_KEPT, LINE_CHARS, TAIL_LINES, StderrRelay
from runners.pool import out_of_memory


def _relay_with_pipe(pid: int) -> tuple[StderrRelay, int, int]:
    sink_r, sink_w = os.pipe()  # the worker's log
    relay = StderrRelay(out=sink_w)
    read_fd, write_fd = os.pipe()
    relay.add(read_fd, pid)
    return relay, write_fd, sink_r


def test_the_tail_is_the_last_non_blank_lines_read_through_to_the_end() -> None:
    relay, write_fd, sink_r = _relay_with_pipe(41)
    lines = [b"line %d" % i for i in range(TAIL_LINES + 3)]
    os.write(write_fd, b"\n\n".join(lines) + b"\n   \n")
    os.close(write_fd)  # the process ended: nothing relayed yet, the tail reads it all
    assert relay.tail(41) == " | ".join(x.decode() for x in lines[-TAIL_LINES:])
    assert b"candidate 41: line 0" in os.read(sink_r, 65536)  # still relayed to the log
    assert relay.tail(41) == ""  # told once
    assert relay.tail(7) == ""  # a process never seen


def test_a_pipe_read_to_its_end_while_waiting_keeps_its_tail_until_asked_for() -> None:
    relay, write_fd, _ = _relay_with_pipe(42)
    os.write(write_fd, b"CUDA error: out of memory")  # no newline: the partial last line counts
    os.close(write_fd)
    key = next(k for k in relay.selector.get_map().values() if k.data is not None)
    while relay._drain(key.fd, key.data):  # as the wait for the next control message does
        pass
    assert not [k for k in relay.selector.get_map().values() if k.data is not None]  # unregistered, closed
    said = relay.tail(42)
    assert said == "CUDA error: out of memory" and relay.tail(42) == ""
    assert out_of_memory(Verdict("crash", f"the candidate process ended (exit status 1); its stderr ended: {said}"))


def test_a_long_error_line_keeps_its_beginning_where_the_errors_name_is() -> None:
    """PyTorch's out-of-memory line, as a candidate process whose set-up ran out of GPU memory
    beside 12 workers wrote it (an H100, 2026-12-06): kept by its end, the tail lost the words
    that make the pool judge the job again."""
    relay, write_fd, _ = _relay_with_pipe(43)
    line = (b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity "
            b"of 79.18 GiB of which 56.81 MiB is free. Including non-PyTorch memory, this process has 1.2 GiB memory "
            b"in use. Of the allocated memory 512 MiB is allocated by PyTorch, and 20 MiB is reserved by PyTorch but "
            b"unallocated. If reserved but unallocated memory is large try setting "
            b"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    os.write(write_fd, b"Traceback (most recent call last):\n  ...\n" + line + b"\n")
    os.close(write_fd)
    said = relay.tail(43)
    assert said.startswith("Traceback (most recent call last): | ... | torch.OutOfMemoryError: CUDA out of memory")
    assert len(said) <= TAIL_LINES * (LINE_CHARS + 3)
    assert out_of_memory(Verdict("crash", f"the candidate process ended (exit status 70); its stderr ended: {said}"))


def test_tails_are_capped_in_length_and_in_number_of_ended_processes() -> None:
    relay = StderrRelay(out=os.open(os.devnull, os.O_WRONLY))
    for pid in range(ENDED_KEPT + 5):
        read_fd, write_fd = os.pipe()
        relay.add(read_fd, pid)
        os.write(write_fd, b"x" * (LINE_CHARS * 3) + b"\n")
        os.close(write_fd)
        key = next(k for k in relay.selector.get_map().values() if k.data is not None)
        while relay._drain(key.fd, key.data):
            pass
    assert relay.tail(0) == ""  # the oldest, dropped
    assert relay.tail(ENDED_KEPT + 4) == "x" * LINE_CHARS
