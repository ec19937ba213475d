#!/usr/bin/env bash
# Install everything into a virtual environment, at the versions in constraints/$TARGET.txt.
# Idempotent: re-running with unchanged inputs is a no-op (stamp file); a changed lock,
# pyproject.toml, this script, the suffix-tree recipe (packaging/suffix_tree) or the compiled
# drafter's sources (packaging/specdec_native) reinstalls, and each native build is redone
# only when its own sources changed.
#   scripts/install.sh [VENV]        (SPECDEC_TARGET=gpu for hosts with CUDA: installs `vllm`)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
TARGET=${SPECDEC_TARGET:-cpu}
stamp="$VENV/.specdec-installed"
recipe=$(find packaging/suffix_tree -type f \( -name '*.toml' -o -name '*.txt' -o -name '*.py' \) \
  -not -path '*/build/*' | sort)
recipe_hash=$(cat $recipe | sha256sum | cut -c1-16)
native_src=$(find packaging/specdec_native -type f -not -path '*/build/*' -not -name '*.pyc' | sort)
native_hash=$(cat $native_src | sha256sum | cut -c1-16)
lock=constraints/$TARGET.txt
want="$(cat pyproject.toml scripts/install.sh "$lock" $recipe $native_src | sha256sum | cut -c1-16)-$TARGET"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install: $VENV is up to date"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# The lock is resolved for one interpreter and platform (its `# platform:` line).
here=$("$VENV/bin/python" scripts/lock.py --platform)
if ! grep -qx "# platform: $here" "$lock"; then
  echo "install: $lock is for $(sed -n 's/^# platform: //p' "$lock"), this is $here:" \
    "regenerate it with $VENV/bin/python scripts/lock.py $TARGET (see its header)" >&2
  exit 1
fi
pip=("$VENV/bin/python" -m pip install --disable-pip-version-check)
"${pip[@]}" -c "$lock" pip >/dev/null
# Every package at its locked version, in one step and without a resolve (scripts/lock.py
# resolved them: `$VENV/bin/python scripts/lock.py $TARGET` regenerates the lock). The lock also
# constrains the isolated build environments below, so no package comes in two versions.
pip+=(--build-constraint "$lock")
"${pip[@]}" --no-deps -r "$lock"
# setuptools notes, for every editable install mapping a folder under another package name
# (sql/ as tasks.sql), that such a mapping may need its finder: ours is tested
# (tests/pipeline/test_wheel_install.py), so the ten-line notice is left out.
PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" --no-deps -e .

# vLLM's `suffix` method needs arctic-inference's suffix tree: packaging/suffix_tree builds it
# from the hash-pinned sdist (never committed here), downloaded with the venv's pip (preparing
# the sdist's metadata imports torch, hence --no-build-isolation). Only --method suffix needs
# it: where it cannot be built this warns and carries on. Rebuilt when the recipe changes.
suffix_stamp="$VENV/.specdec-suffix-tree"
check="import arctic_inference.suffix_decoding._C as _, arctic_inference.suffix_decoding as s
s.SuffixDecodingCache"
if [ "$(cat "$suffix_stamp" 2>/dev/null)" != "$recipe_hash" ] \
  || ! "$VENV/bin/python" -c "$check" 2>/dev/null; then
  src=$(mktemp -d)
  if "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
      -r packaging/suffix_tree/sdist.txt -d "$src" \
    && tar -xzf "$src"/arctic_inference-*.tar.gz -C "$src" \
    && "${pip[@]}" -q --no-deps --force-reinstall ./packaging/suffix_tree \
      -C cmake.define.ARCTIC_INFERENCE_SRC="$(echo "$src"/arctic_inference-*/)" \
    && "$VENV/bin/python" -c "$check"; then
    echo "$recipe_hash" > "$suffix_stamp"
  else
    rm -f "$suffix_stamp"
    if "$VENV/bin/python" -c "$check" 2>/dev/null; then
      echo "WARNING: could not rebuild arctic-inference's suffix tree (see the messages" \
        "above): the build already installed is kept." >&2
    else
      # a half-installed one would make vLLM (and specdec) believe suffix decoding is there
      "$VENV/bin/python" -m pip uninstall -q -y arctic_inference >/dev/null 2>&1 || true
      echo "WARNING: could not build arctic-inference's suffix tree (see the messages above):" \
        "--method suffix stays unavailable, everything else works." >&2
    fi
  fi
  rm -rf "$src"
fi

# specdec's compiled drafter (C++, nanobind + scikit-build-core; --drafter native, the
# default): its own distribution, rebuilt when its sources change. Unlike the suffix tree it is
# required: without it specdec refuses to start unless --drafter python is given.
native_stamp="$VENV/.specdec-native"
native_check="from specdec.native import load_core; load_core()"
if [ "$(cat "$native_stamp" 2>/dev/null)" != "$native_hash" ] \
  || ! "$VENV/bin/python" -c "$native_check" 2>/dev/null; then
  rm -f "$native_stamp"
  "${pip[@]}" -q --no-deps --force-reinstall ./packaging/specdec_native
  "$VENV/bin/python" -c "$native_check"
  echo "$native_hash" > "$native_stamp"
fi

"$VENV/bin/python" -c "import transformers, vllm, specdec; print('install: ok, vllm', vllm.__version__)"
echo "$want" > "$stamp"
