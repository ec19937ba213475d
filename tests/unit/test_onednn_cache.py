"""oneDNN's primitive cache is bounded for the engines specdec starts, unless the user chose."""

from __future__ import annotations

import os

from specdec.engines.onednn_cache import CAPACITY_ENV, DEFAULT_CAPACITY, apply_primitive_cache_capacity


def test_the_cache_is_bounded_by_default(monkeypatch):
    monkeypatch.delenv(CAPACITY_ENV, raising=False)
    assert apply_primitive_cache_capacity() == str(DEFAULT_CAPACITY)
    assert os.environ[CAPACITY_ENV] == str(DEFAULT_CAPACITY)


def test_a_capacity_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv(CAPACITY_ENV, "4096")
    assert apply_primitive_cache_capacity() == "4096"
    assert os.environ[CAPACITY_ENV] == "4096"
