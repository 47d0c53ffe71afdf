"""docs/EXTENDING.md (issue 45, item 5): a section for each extension point, each under a page,
every file it links exists, and each toy plugin it quotes registers under the name the page
gives, so the page cannot drift from the code it walks through."""

from __future__ import annotations

import re

from tests.helpers import ROOT

DOC = ROOT / "docs" / "EXTENDING.md"
PAGE = 60  # lines: a printed page of prose and code

#: Section -> (the decorator line the page quotes, the toy plugin that must hold it).
SECTIONS = {
    "A method": ('@register_method("toy_best_of_n_repair")', "tests/toy_best_of_n_repair.py"),
    "A suite adapter": ('@register_adapter("toy")', "tests/toy_adapter.py"),
    "A statistic": ('@register_statistic("first_try_pass")', "tests/toy_statistic.py"),
    "A figure": ('@register_figure("calls_per_unit")', "tests/toy_figure.py"),
}


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)\n", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_each_extension_point_has_a_section_under_a_page_quoting_its_toy() -> None:
    found = sections()
    assert list(found) == list(SECTIONS)
    for name, (decorator, toy) in SECTIONS.items():
        body = found[name]
        assert len(body.strip().splitlines()) <= PAGE, name
        assert decorator in body and decorator in (ROOT / toy).read_text(), name
        assert "To come" not in body, name


def test_every_file_the_page_links_exists() -> None:
    links = re.findall(r"\]\((\.\./[^)#\s]+)\)", DOC.read_text())
    assert len(links) >= 16
    for link in links:
        assert (DOC.parent / link).exists(), link
