#!/usr/bin/env bash
# The demo on bundled defaults (flows/demo.py): code-editing and chat prompt shards, each kind
# run without speculation (`none`), then under the default method `auto` (its pilot's choice
# printed), all in one process on Prefect's embedded server; one line per run, then the speed-up
# per shard kind and PNG charts under out/demo/plots/. Engine and Prefect logs go to out/demo/demo.log.
#   scripts/demo.sh [PYTHON] [DEMO OPTIONS...]   (make demo installs first; --help lists options)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
shift || true
export TOKENIZERS_PARALLELISM=false
exec "$PY" -m flows.demo "$@"
