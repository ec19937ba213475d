"""The size limits of issue 31: the core package specdec/ at most 5,000 lines of Python, the
bench at most 2,000 (counted as `find DIR -name '*.py' | xargs cat | wc -l` counts them)."""

from __future__ import annotations

import pytest

from support import REPO


@pytest.mark.parametrize(("package", "limit"), [("specdec", 5000), ("bench", 2000)])
def test_package_stays_within_its_line_limit(package, limit):
    lines = sum(path.read_bytes().count(b"\n") for path in (REPO / package).rglob("*.py"))
    assert lines <= limit, f"{package}/ has {lines} lines of Python; the limit is {limit}"
