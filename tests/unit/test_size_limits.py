"""The size limits the project keeps: the core package specdec/ at most 5,000 lines of Python, the
bench at most 2,000 (counted as `find DIR -name '*.py' | xargs cat | wc -l` counts them), and the
design doc, docs/internals.md, at most 400 lines."""

from __future__ import annotations

import pytest

from support import REPO


@pytest.mark.parametrize(("package", "limit"), [("specdec", 5000), ("bench", 2000)])
def test_package_stays_within_its_line_limit(package, limit):
    lines = sum(path.read_bytes().count(b"\n") for path in (REPO / package).rglob("*.py"))
    assert lines <= limit, f"{package}/ has {lines} lines of Python; the limit is {limit}"


def test_the_design_doc_stays_within_its_line_limit():
    lines = (REPO / "docs" / "internals.md").read_bytes().count(b"\n")
    assert lines <= 400, f"docs/internals.md has {lines} lines; the limit is 400"
