#!/usr/bin/env bash
# The demo on bundled defaults: sample shards from HumanEval and ShareGPT, the
# speculative-generation flow on Prefect's embedded server (no set-up), results in DuckDB,
# then `specdec report`.   scripts/demo.sh [PYTHON]   (make demo installs first)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
OUT=${DEMO_OUT:-out/demo}
# A Prefect home of its own and no API URL: the flow runs against the embedded server,
# whatever Prefect profile this machine has.
export PREFECT_HOME="$PWD/$OUT/prefect-home"
unset PREFECT_API_URL
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export TOKENIZERS_PARALLELISM=false

started=$(date +%s)
"$PY" -m flows.demo_data --output "$OUT/prompts" --per-shard 8
"$PY" -m specdec.cli run --source "$OUT/prompts" --db "$OUT/specdec.duckdb" \
  --staging "$OUT/staging" --max-tokens 64 --batch-size 16 --run-name "${DEMO_RUN:-demo}"
"$PY" -m specdec.cli report --db "$OUT/specdec.duckdb"
echo "demo: $(( $(date +%s) - started )) s wall; results in $OUT/specdec.duckdb"
