"""Models derived from the bundled SmolLM2-135M-Instruct, for engine tests that need a model
shape it lacks, saved as Hugging Face folders with the bundled tokenizer (no download):

- `draft_model`: its first layers with the same embeddings, norm and head: a draft model
  for `--method draft` that shares the target's vocabulary;
- `tp2_model`: the same model with heads added that contribute nothing, so that two
  tensor-parallel ranks can split it (vLLM needs the head counts divisible by the ranks);
- `other_vocab_model`: a draft whose vocabulary is smaller than the target's.

Each is written once per cache folder (the test session's), from the bundled model's weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from specdec.models import default_model_dir

WEIGHTS = "model.safetensors"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def _derive(target: Path, edit_config, edit_weights) -> Path:
    if (target / "config.json").is_file():
        return target
    source = default_model_dir()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = json.loads((source / "config.json").read_text())
    weights = load_file(str(source / WEIGHTS))
    edit_weights(config, weights)
    edit_config(config)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / WEIGHTS), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, tmp / name)
    tmp.rename(target)
    return target


def draft_model(cache: Path, num_layers: int = 4) -> Path:
    """The bundled model's first `num_layers` layers, its embeddings, final norm and head."""

    def keep_layers(config: dict, weights: dict) -> None:
        for name in list(weights):
            if name.startswith("model.layers.") and int(name.split(".")[2]) >= num_layers:
                del weights[name]

    return _derive(cache / f"smollm2-draft-{num_layers}-layers",
                   lambda c: c.update(num_hidden_layers=num_layers), keep_layers)


def tp2_model(cache: Path) -> Path:
    """The bundled model with one more key-value head and three more query heads (4 and 12
    instead of 3 and 9: two ranks can split them), whose output projection is zero: they add
    nothing, so the model computes what the bundled one does."""

    def pad_heads(config: dict, weights: dict) -> None:
        import torch

        head_dim = config["head_dim"]
        group = config["num_attention_heads"] // config["num_key_value_heads"]
        for name in list(weights):
            w = weights[name]
            if name.endswith("self_attn.q_proj.weight"):
                weights[name] = torch.cat([w, w.new_zeros(group * head_dim, w.shape[1])])
            elif name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
                weights[name] = torch.cat([w, w.new_zeros(head_dim, w.shape[1])])
            elif name.endswith("self_attn.o_proj.weight"):
                weights[name] = torch.cat([w, w.new_zeros(w.shape[0], group * head_dim)], dim=1)
        config.update(num_attention_heads=config["num_attention_heads"] + group,
                      num_key_value_heads=config["num_key_value_heads"] + 1)

    return _derive(cache / "smollm2-tp2", lambda c: None, pad_heads)


def other_vocab_model(cache: Path, vocab_size: int = 32000) -> Path:
    """A draft whose vocabulary (embeddings and head) is cut to `vocab_size` tokens."""

    def cut_vocab(config: dict, weights: dict) -> None:
        for name in list(weights):
            if name.startswith("model.layers.") and int(name.split(".")[2]) >= 2:
                del weights[name]
        weights["model.embed_tokens.weight"] = weights["model.embed_tokens.weight"][:vocab_size]
        if "lm_head.weight" in weights:
            weights["lm_head.weight"] = weights["lm_head.weight"][:vocab_size]

    return _derive(cache / f"smollm2-vocab-{vocab_size}",
                   lambda c: c.update(num_hidden_layers=2, vocab_size=vocab_size), cut_vocab)
