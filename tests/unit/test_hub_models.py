"""Models named by hub id (`org/name`) resolve to their snapshot in the local Hugging Face
cache, never downloaded, and hash by content like a folder; a draft model with another
vocabulary is refused before an engine starts (specdec.models)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specdec import models

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _model_folder(folder: Path, vocab_size: int = 49152) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"vocab_size": vocab_size, "max_position_embeddings": 512}))
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    return folder


def _hub_cache(root: Path, repo_id: str, source: Path) -> Path:
    """The layout `hf download` leaves: blobs, a snapshot of links to them, refs/main."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for path in source.iterdir():
        blob = repo / "blobs" / f"blob-{path.name}"
        blob.write_bytes(path.read_bytes())
        os.symlink(os.path.relpath(blob, snapshot), snapshot / path.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(root))
    monkeypatch.chdir(tmp_path)  # no folder named like the hub id here
    return root


def test_a_hub_id_is_its_cached_snapshot_and_hashes_like_the_same_folder(tmp_path, hub_cache):
    folder = _model_folder(tmp_path / "plain")
    snapshot = _hub_cache(hub_cache, "acme/smol", folder)
    assert models.resolve_model("acme/smol") == snapshot
    assert models.model_digest("acme/smol") == models.model_digest(folder)


def test_a_hub_id_missing_from_the_cache_says_where_it_looked(hub_cache):
    with pytest.raises(models.ModelError, match=r"acme/absent is not in the local Hugging Face cache"):
        models.resolve_model("acme/absent")


def test_a_folder_without_config_is_refused(tmp_path):
    with pytest.raises(models.ModelError, match="has no config.json"):
        models.resolve_model(str(tmp_path))


def test_a_draft_with_another_vocabulary_is_refused_naming_both_sizes(tmp_path):
    target, draft = _model_folder(tmp_path / "target"), _model_folder(tmp_path / "draft", vocab_size=32000)
    with pytest.raises(models.ModelError, match="vocabulary of 32000 tokens, the target target 49152"):
        models.check_draft_vocab(target, draft)
    models.check_draft_vocab(target, _model_folder(tmp_path / "same"))
