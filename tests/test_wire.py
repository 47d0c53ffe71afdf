"""The judge <-> candidate conversation (judge/wire.py): what a call's arguments may hold crosses
intact (strided tensors, launch-option mappings and dtypes of a replayed suite launch), and a
description that makes no sense is refused rather than guessed at."""

from __future__ import annotations

import socket

import pytest
import torch

from judge import wire


def _round_trip(values: object) -> object:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        spec, tensors = wire.encode_values(values)
        wire.send(a, {"args": spec}, tensors)
        header, back = wire.recv(b)
        return wire.decode_values(header["args"], back)


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
        wire.decode_values({"dtype": "float128"}, [])
    with pytest.raises(wire.WireError):
        wire.decode_values({"map": [[1, {"value": 2}]]}, [])
    with pytest.raises(wire.WireError):
        wire.decode_values({"tensor": 3}, [])
    assert isinstance(wire.decode_values({"other": "function"}, []), wire.Opaque)
