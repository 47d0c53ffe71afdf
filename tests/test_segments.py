"""bench/adapters/_segments.py: many nodes' source text from one split of the source, the same
text `ast.get_source_segment` gives node by node (reading a suite's files spent a third of its
time re-splitting each file per node)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.adapters._segments import source_segments

FIXTURES = Path(__file__).resolve().parent / "fixtures"

EDGES = [
    "a = 1\r\nb = 'é' + torch.randn(3)\rc = 2\n\x0cd = [1,\n 2]  # torch.rand(1)\n",  # CRLF, CR, a form feed, UTF-8
    "x = 1; y = torch.rand(2)",  # two statements on one line, no final newline
    "def f():\n    return '\u00fc\u4e2d'\n\n\nclass C:\n    z = f()\n",
    "",
]


@pytest.mark.parametrize("source", EDGES)
def test_segments_match_the_standard_library_on_awkward_sources(source: str) -> None:
    nodes = list(ast.walk(ast.parse(source)))
    assert source_segments(source, nodes) == [ast.get_source_segment(source, n) or "" for n in nodes]


@pytest.mark.slow  # 4 s: every fixture suite parsed; the fast subset keeps the small cases above
def test_segments_match_the_standard_library_on_every_suite_fixture() -> None:
    files = sorted(FIXTURES.rglob("*.py"))
    assert len(files) > 10
    compared = 0
    for path in files:
        source = path.read_text(errors="replace")
        try:
            nodes = list(ast.walk(ast.parse(source)))
        except SyntaxError:
            continue
        assert source_segments(source, nodes) == [ast.get_source_segment(source, n) or "" for n in nodes], path
        compared += len(nodes)
    assert compared > 1000
