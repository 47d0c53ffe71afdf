"""The judge <-> candidate conversation (judge/candidate/wire.py): what a call's arguments may hold crosses
intact (strided tensors, launch-option mappings and dtypes of a replayed suite launch), and a
description that makes no sense is refused rather than guessed at."""

from __future__ import annotations

import socket

import pytest
import torch

from judge.candidate import structure, wire


def _round_trip(values: object) -> object:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        spec, tensors = structure.encode_values(values)
        wire.send(a, {"args": spec}, tensors)
        header, back = wire.recv(b)
        return structure.decode_values(header["args"], back)


def test_arguments_of_a_replayed_launch_cross_intact() -> None:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, :3]  # strided: padding kept, layout kept
    got = _round_trip([x, 7, 0.5, None, "s", {"num_warps": 4, "scale": torch.ones(2)}, torch.bfloat16, (3, 1)])
    assert isinstance(got, list)
    t, *_, options, dtype, grid = got
    assert torch.equal(t, x) and t.stride() == x.stride()
    assert got[1:5] == [7, 0.5, None, "s"]
    assert options["num_warps"] == 4 and torch.equal(options["scale"], torch.ones(2))
    assert dtype is torch.bfloat16 and grid == (3, 1)


def test_nonsense_descriptions_are_refused() -> None:
    with pytest.raises(wire.WireError):
        structure.decode_values({"dtype": "float128"}, [])
    with pytest.raises(wire.WireError):
        structure.decode_values({"map": [[1, {"value": 2}]]}, [])
    with pytest.raises(wire.WireError):
        structure.decode_values({"tensor": 3}, [])
    assert isinstance(structure.decode_values({"other": "function"}, []), structure.Opaque)


# ---------------------------------------------------------------- the judge's objects, rebuilt in the candidate process


class SuiteConfig:
    """Like int_scaled_matmul.py's `Config`: a suite class whose attributes the wrapper reads."""

    def __init__(self, num_warps: int = 4, **kwargs: object) -> None:
        self.num_warps = num_warps
        self.kwargs = kwargs


def _to_candidate(values: object, local: object = None) -> object:
    """The judge's side encodes; the candidate process decodes with its own module as `local`."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        spec, tensors = structure.encode_values(values)
        wire.send(a, {"args": spec}, tensors)
        header, back = wire.recv(b)
        return structure.decode_values(header["args"], back, structure.Rebuilder(local))


def test_modules_devices_and_every_dtype_reach_the_candidate_intact() -> None:
    import triton.language as tl

    norm = torch.nn.LayerNorm(6, eps=1e-3)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 6))
    got = _to_candidate([norm, torch.device("cpu"), torch.float8_e5m2, tl.float8e5, torch.Size([2, 3]),
                         {1: "a"}, {3, 4}])
    assert isinstance(got, list)
    module, device, f8, tl_f8, size, int_keys, a_set = got
    assert type(module) is torch.nn.LayerNorm and module is not norm
    assert module.normalized_shape == (6,) and module.eps == 1e-3 and module.elementwise_affine
    assert type(module.weight) is torch.nn.Parameter and torch.equal(module.weight, norm.weight)
    x = torch.randn(2, 6)
    assert torch.equal(module(x), norm(x)), "the rebuilt module computes what the judge's does"
    assert device == torch.device("cpu") and f8 is torch.float8_e5m2 and tl_f8 == tl.float8e5
    assert size == torch.Size([2, 3]) and int_keys == {1: "a"} and a_set == {3, 4}


def test_a_suite_class_is_taken_from_the_candidates_module_or_stood_in_for() -> None:
    import types
    from collections import namedtuple

    Point = namedtuple("Point", ["x", "y"])
    config = SuiteConfig(num_warps=8, BLOCK=64)
    local = types.SimpleNamespace(SuiteConfig=SuiteConfig)  # the candidate's source defines the class
    got = _to_candidate([config, Point(1, torch.ones(2))], local)
    assert isinstance(got, list)
    rebuilt, point = got
    assert type(rebuilt) is SuiteConfig and rebuilt.num_warps == 8 and rebuilt.kwargs == {"BLOCK": 64}
    assert point.x == 1 and torch.equal(point.y, torch.ones(2)) and point == (1, point.y)
    got = _to_candidate([config], None)  # a candidate that does not define it: attributes still read
    assert isinstance(got, list)
    assert got[0].num_warps == 8 and got[0].kwargs == {"BLOCK": 64}


def test_the_judge_never_rebuilds_what_a_candidate_process_sends() -> None:
    """Objects, parameters and names from the untrusted side stay `Opaque`: nothing is imported,
    constructed or unpickled on the judge's side."""
    spec, tensors = structure.encode_values([SuiteConfig(), torch.nn.Parameter(torch.ones(2)), len])
    got = structure.decode_values(spec, tensors)
    assert isinstance(got, list) and all(isinstance(v, structure.Opaque) for v in got)
    assert got[1].subclass, "a Parameter returned as an output is a tensor subclass"
    forged = {"object": ["os", "system"], "new": {"value": None}, "state": {"value": None}}
    assert isinstance(structure.decode_values(forged, []), structure.Opaque)
    # The candidate process encodes its own objects by type name only.
    spec, _ = structure.encode_values([SuiteConfig()], objects=False)
    assert spec == {"seq": [{"other": "SuiteConfig"}], "tuple": False}


# ---------------------------------------------------------------- the arena: shared memory reused for a link's life


def _links() -> tuple[socket.socket, socket.socket, wire.Link, wire.Link]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return a, b, wire.Link(a), wire.Link(b)


def test_messages_reuse_one_arena_until_one_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[int] = []
    send_fds = socket.send_fds

    def counting(sock: socket.socket, buffers: list[bytes], fds: list[int]) -> int:
        handed.append(len(fds))
        return send_fds(sock, buffers, fds)

    monkeypatch.setattr(socket, "send_fds", counting)
    a, b, sender, receiver = _links()
    with a, b:
        sizes = [1000, 5000, 200, 300_000, 10]  # float32 elements: the fourth needs a larger arena
        passed = []
        for i, n in enumerate(sizes):
            sent = torch.arange(n, dtype=torch.float32) + i
            before = len(handed)
            sender.send({"i": i}, [sent, sent[::7]])
            passed.append(len(handed) - before)
            header, (got, strided) = receiver.recv()
            assert header["i"] == i and torch.equal(got, sent) and torch.equal(strided, sent[::7])
            assert strided.stride() == (7,)
        assert passed == [1, 0, 0, 1, 0]
        sender.close()
        receiver.close()


def test_what_the_receiver_got_is_its_own_copy() -> None:
    """The sender writes its next message over the same memory: nothing received may change."""
    a, b, sender, receiver = _links()
    with a, b:
        sender.send({}, [torch.zeros(1000)])
        _, (first,) = receiver.recv()
        sender.send({}, [torch.ones(1000)])
        _, (second,) = receiver.recv()
        assert torch.equal(first, torch.zeros(1000)) and torch.equal(second, torch.ones(1000))


def test_memory_that_could_shrink_under_the_receiver_is_refused() -> None:
    import os

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        fd = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, 4096)
        frame = b'{"tensors": [{"dtype": "uint8", "size": [4], "stride": [1], "offset": 0, "nbytes": 4}]}'
        socket.send_fds(a, [len(frame).to_bytes(4, "big") + frame], [fd])
        os.close(fd)
        with pytest.raises(wire.WireError, match="not sealed against shrinking"):
            wire.Link(b).recv()
        r, w = os.pipe()
        socket.send_fds(a, [len(frame).to_bytes(4, "big") + frame], [r])
        os.close(r)
        os.close(w)
        with pytest.raises(wire.WireError, match="not a sealable memfd"):
            wire.Link(b).recv()


def test_tensors_without_memory_to_read_them_from_are_refused() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        frame = b'{"tensors": [{"dtype": "uint8", "size": [4], "stride": [1], "offset": 0, "nbytes": 4}]}'
        a.sendall(len(frame).to_bytes(4, "big") + frame)
        with pytest.raises(wire.WireError, match="without memory"):
            wire.Link(b).recv()


def test_a_struct_sequence_argument_keeps_its_field_names() -> None:
    """torch.return_types.max (what `torch.max(x, dim)` returns) passed to a suite's wrapper:
    rebuilt as the same type, its `.values`/`.indices` readable (an H200 check failed on
    tb-max_reduction: the struct sequence was built with one argument per field)."""
    found = torch.max(torch.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
    got = _to_candidate([found])
    assert isinstance(got, list)
    (rebuilt,) = got
    assert type(rebuilt) is type(found)
    assert torch.equal(rebuilt.values, found.values) and torch.equal(rebuilt.indices, found.indices)


def test_a_candidate_process_gets_known_bytes_before_and_after_each_input() -> None:
    """What a kernel reads below an input's start or past its end is zeros, not the heap of a
    process with its own history (a flip reading before its row start once made the same
    candidate's failure text, and a method's next prompt, differ between two identical runs)."""
    from bench.slack import front_bytes, slack_bytes

    ours, theirs = socket.socketpair()
    try:
        x = torch.arange(1.0, 13.0).reshape(3, 4)
        wire.send(ours, {"hello": 1}, [x])
        header, (got,) = wire.recv(theirs, slack=True)
        assert header == {"hello": 1} and torch.equal(got, x)
        front = front_bytes(x.nbytes)
        assert got.storage_offset() * got.element_size() == front and front % 256 == 0
        raw = torch.empty(0, dtype=torch.uint8).set_(got.untyped_storage())
        assert raw.numel() == front + x.nbytes + slack_bytes(x.nbytes)
        assert int(raw[:front].count_nonzero()) == 0 and int(raw[front + x.nbytes:].count_nonzero()) == 0
    finally:
        ours.close()
        theirs.close()


def test_inline_messages_carry_their_bytes_in_the_socket_out_of_the_senders_reach() -> None:
    """A batched call's reply (judge/candidate/server.py `_op_calls`): its tensors' bytes follow
    the frame in the socket, so what the sender writes into its tensors or arena afterwards (it
    runs the next call at once) changes nothing the receiver reads. Arena messages before and
    after it on the same link still work; an inline message over the limit, or one that comes
    with a descriptor, is refused."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        sender, receiver = wire.Link(a), wire.Link(b)
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]
        sender.send({"n": 1}, [torch.ones(3)])
        assert torch.equal(receiver.recv()[1][0], torch.ones(3))
        sender.send({"n": 2, "more": True}, [x, torch.tensor([7], dtype=torch.int64)], inline=True)
        x.fill_(-1.0)  # the sender runs on before the receiver reads
        header, (got, seven) = receiver.recv()
        assert header == {"n": 2, "more": True}
        assert torch.equal(got, torch.tensor([[1.0, 2.0], [4.0, 5.0]])) and got.stride() == (3, 1)
        assert int(seven) == 7
        sender.send({"n": 3}, [torch.zeros(2)])
        assert torch.equal(receiver.recv()[1][0], torch.zeros(2))
        with pytest.raises(wire.WireError, match="inline"):
            sender.send({}, [torch.zeros(wire.INLINE_LIMIT // 4 + 1)], inline=True)
        frame = b'{"tensors": [], "inline": 99999999999}'
        a.sendall(len(frame).to_bytes(4, "big") + frame)
        with pytest.raises(wire.WireError, match="inline message"):
            receiver.recv()
