#!/usr/bin/env bash
# The demo on bundled defaults: sample shards from HumanEval and ShareGPT, the
# speculative-generation flow on Prefect's embedded server (no set-up), then the same shards
# again without speculation (`--method none`: another config hash, so a run of its own),
# results in DuckDB, `specdec report`, and last what speculation bought on these shards.
#   scripts/demo.sh [PYTHON]   (make demo installs first)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
OUT=${DEMO_OUT:-out/demo}
RUN=${DEMO_RUN:-demo}
DB="$OUT/specdec.duckdb"
# A Prefect home of its own and no API URL: the flow runs against the embedded server,
# whatever Prefect profile this machine has.
export PREFECT_HOME="$PWD/$OUT/prefect-home"
unset PREFECT_API_URL
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export TOKENIZERS_PARALLELISM=false

started=$(date +%s)
"$PY" -m specdec.cli sample --dataset demo --output "$OUT/prompts" --limit 8
# Same shards, same generation options; only the method differs.
for method in specdec none; do
  name=$RUN
  [ "$method" = specdec ] || name="$RUN-$method"
  "$PY" -m specdec.cli run --source "$OUT/prompts" --db "$DB" --staging "$OUT/staging" \
    --max-tokens 64 --batch-size 16 --method "$method" --run-name "$name"
done
"$PY" -m specdec.cli report --db "$DB"
echo
echo "== What speculation bought: run $RUN (specdec) against $RUN-none on the same shards"
"$PY" -m specdec.cli sql --db "$DB" "
  SELECT run_id, method, baseline_run_id, num_shards, num_output_tokens, tokens_per_forward,
         tokens_per_s, baseline_tokens_per_s AS none_tokens_per_s, speedup
  FROM v_method_comparison
  WHERE run_id = ? AND baseline_run_id = ?" --param "$RUN" --param "$RUN-none"
echo "demo: $(( $(date +%s) - started )) s wall; results in $DB"
