#!/usr/bin/env bash
# Build arctic-inference's suffix tree (the only part of it vLLM's `suffix` method needs) from
# its 0.3.0 source distribution and install it into VENV as a minimal `arctic_inference`
# package holding just `arctic_inference.suffix_decoding` (SuffixDecodingCache + the compiled
# `_C` extension). Nothing of arctic-inference is committed here: the sdist is fetched with pip
# at set-up time and everything happens under build/arctic_suffix (git-ignored).
#
# The package declares no entry points: arctic's own vLLM plugin (which patches vLLM for GPU
# builds of a different version) must stay unregistered.
#
#   scripts/build_suffix_tree.sh VENV
#
# Idempotent: does nothing when `arctic_inference.suffix_decoding` already imports in VENV.
# Never fails the caller: when the build is impossible here it prints a warning and exits 0
# (everything except `--method suffix` works without it).
set -uo pipefail
VENV=${1:?usage: scripts/build_suffix_tree.sh VENV}
if ! VENV=$(cd "$VENV" 2>/dev/null && pwd); then
  echo "WARNING: suffix tree not built: no virtual environment at $1" >&2
  exit 0
fi
cd "$(dirname "$0")/.."
PY="$VENV/bin/python"
VERSION=0.3.0
SDIST_SHA256=7f22e3e1b1071c6061c0d6951be17c0fb50b08d06d6e543144c8f52faba60a36
NANOBIND=2.9.2
WORK=build/arctic_suffix
CHECK="import arctic_inference.suffix_decoding._C, arctic_inference.suffix_decoding as s; s.SuffixDecodingCache"

if "$PY" -c "$CHECK" >/dev/null 2>&1; then
  echo "suffix tree: arctic_inference.suffix_decoding already installed in $VENV"
  exit 0
fi

pip_() { "$PY" -m pip --disable-pip-version-check "$@"; }

fetch_sdist() {
  # --no-build-isolation: pip still prepares the sdist's metadata, and in an isolated
  # environment with --no-binary :all: it would try to build all of arctic's build
  # requirements (torch included) from source. The hash pins the exact file.
  local sdist="$WORK/arctic_inference-$VERSION.tar.gz"
  if [ -f "$sdist" ] && echo "$SDIST_SHA256  $sdist" | sha256sum -c --quiet - 2>/dev/null; then
    return 0
  fi
  echo "arctic-inference==$VERSION --hash=sha256:$SDIST_SHA256" >"$WORK/requirements.txt"
  pip_ download --no-deps --no-binary :all: --no-build-isolation --timeout 60 \
    -r "$WORK/requirements.txt" -d "$WORK" -q
  echo "$SDIST_SHA256  $sdist" | sha256sum -c --quiet -
}

extract_sources() {
  # Only the suffix-tree sources and the two Python files of arctic_inference.suffix_decoding.
  local top="arctic_inference-$VERSION"
  rm -rf "$WORK/src"
  mkdir -p "$WORK/src"
  tar -xzf "$WORK/arctic_inference-$VERSION.tar.gz" -C "$WORK/src" --strip-components=1 \
    "$top/LICENSE" "$top/csrc/suffix_decoding" \
    "$top/arctic_inference/suffix_decoding/__init__.py" \
    "$top/arctic_inference/suffix_decoding/cache.py"
}

build_tools() {
  # nanobind (headers + CMake config) goes to a build-only folder, not into the venv.
  if ! PYTHONPATH="$WORK/tools" "$PY" -c "import nanobind; assert nanobind.__version__ == '$NANOBIND'" 2>/dev/null; then
    pip_ install --no-deps --target "$WORK/tools" -q "nanobind==$NANOBIND"
  fi
  CMAKE=cmake
  if ! cmake_ok cmake; then
    pip_ install --no-deps --target "$WORK/tools" -q "cmake>=3.18"
    CMAKE="$WORK/tools/bin/cmake"
    cmake_ok "$CMAKE"
  fi
}

cmake_ok() {
  command -v "$1" >/dev/null || return 1
  local v
  v=$("$1" --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
  [ -n "$v" ] && printf '%s\n3.18\n' "$v" | sort -V -C -r
}

compile_extension() {
  local out="$WORK/pkg/arctic_inference/suffix_decoding"
  rm -rf "$WORK/cmake" "$WORK/pkg"
  mkdir -p "$out"
  PYTHONPATH="$(pwd)/$WORK/tools" "$CMAKE" -S "$WORK/src/csrc/suffix_decoding" -B "$WORK/cmake" \
    -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PY" \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$(pwd)/$out" >"$WORK/cmake.log" 2>&1 \
    || { tail -20 "$WORK/cmake.log"; return 1; }
  "$CMAKE" --build "$WORK/cmake" -j "$(nproc)" >>"$WORK/cmake.log" 2>&1 \
    || { tail -30 "$WORK/cmake.log"; return 1; }
  ls "$out"/_C*.so >/dev/null
}

write_package() {
  local pkg="$WORK/pkg"
  cp "$WORK/src/arctic_inference/suffix_decoding/__init__.py" \
    "$WORK/src/arctic_inference/suffix_decoding/cache.py" "$pkg/arctic_inference/suffix_decoding/"
  cp "$WORK/src/LICENSE" "$pkg/LICENSE"
  cat >"$pkg/arctic_inference/__init__.py" <<'EOF'
"""Minimal arctic-inference: only `arctic_inference.suffix_decoding`, built from the 0.3.0
sdist by specdec's scripts/build_suffix_tree.sh for vLLM's `suffix` speculative method."""
EOF
  # No entry points: arctic's vLLM plugin must not be registered.
  cat >"$pkg/pyproject.toml" <<EOF
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "arctic_inference"
version = "$VERSION+suffixonly"
description = "Suffix decoding tree from Snowflake arctic-inference $VERSION (minimal build)"
license = {text = "Apache-2.0"}
requires-python = ">=3.10"
dependencies = ["numpy"]

[tool.setuptools]
packages = ["arctic_inference", "arctic_inference.suffix_decoding"]

[tool.setuptools.package-data]
"arctic_inference.suffix_decoding" = ["_C*.so"]
EOF
}

install_package() {
  # Built in pip's isolated environment (setuptools from the index), so the venv's own
  # setuptools (possibly too old to build wheels) does not matter; offline, fall back to it.
  pip_ install -q --no-deps --force-reinstall "./$WORK/pkg" \
    || pip_ install -q --no-deps --no-build-isolation --force-reinstall "./$WORK/pkg"
  if ! "$PY" -c "$CHECK"; then
    # half-installed would make vLLM (and specdec) believe suffix decoding is available
    pip_ uninstall -q -y arctic_inference
    return 1
  fi
}

build() {
  set -e
  mkdir -p "$WORK"
  # one build at a time in the shared build folder (e.g. two installs started together)
  if command -v flock >/dev/null; then
    exec 9>"$WORK/.lock"
    flock 9
    if "$PY" -c "$CHECK" >/dev/null 2>&1; then return 0; fi
  fi
  fetch_sdist
  extract_sources
  build_tools
  compile_extension
  write_package
  install_package
}

start=$(date +%s)
(build)
rc=$?
if [ $rc -ne 0 ]; then
  echo "WARNING: could not build arctic-inference's suffix tree (see the messages above;" \
    "compiler output in $WORK/cmake.log): --method suffix stays unavailable, everything" \
    "else works." >&2
  exit 0
fi
echo "suffix tree: arctic_inference.suffix_decoding installed in $VENV ($(($(date +%s) - start)) s)"
