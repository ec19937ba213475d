"""docs/reference.md is generated (flows/reference.py): the committed file must be what the
generator writes today, so a new option, parameter, column or view cannot go undocumented."""

from __future__ import annotations

import difflib

import pytest

from support import REPO

pytest.importorskip("duckdb")
pytest.importorskip("prefect")

REFERENCE = REPO / "docs" / "reference.md"


def test_committed_reference_is_up_to_date():
    from flows.reference import render

    expected = render()
    committed = REFERENCE.read_text(encoding="utf-8") if REFERENCE.is_file() else ""
    if committed != expected:
        diff = "".join(list(difflib.unified_diff(
            committed.splitlines(keepends=True), expected.splitlines(keepends=True),
            "docs/reference.md (committed)", "python -m flows.reference (now)"))[:60])
        pytest.fail("docs/reference.md is out of date: run `make docs` and commit the result.\n" + diff,
                    pytrace=False)


def test_reference_is_deterministic_and_local():
    from flows.reference import render

    text = render()
    assert text == render()
    assert str(REPO) not in text, "no absolute paths of this machine"
