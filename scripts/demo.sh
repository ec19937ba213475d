#!/usr/bin/env bash
# The demo on bundled defaults: sample shards from HumanEval and ShareGPT, the
# speculative-generation flow on Prefect's embedded server (no set-up), then the same shards
# again without speculation (`--method none`: another config hash, so a run of its own),
# then a small shard with four samples per prompt (sampled, fixed seed) with and without
# speculation, results in DuckDB, `specdec report`, and last what speculation bought.
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
# Four samples of each of 4 prompts: 16 requests, each sample with its own seed.
"$PY" -m specdec.cli sample --dataset humaneval --output "$OUT/samples-prompts/humaneval-4.parquet" --limit 4
for method in specdec none; do
  name=$RUN-samples4
  [ "$method" = specdec ] || name="$RUN-samples4-none"
  "$PY" -m specdec.cli run --source "$OUT/samples-prompts" --db "$DB" --staging "$OUT/staging" \
    --max-tokens 48 --batch-size 16 --samples 4 --temperature 0.8 --seed 7 --method "$method" --run-name "$name"
done
"$PY" -m specdec.cli report --db "$DB"
echo
echo "== What speculation bought: run $RUN (specdec) against $RUN-none on the same shards"
"$PY" -m specdec.cli sql --db "$DB" "
  SELECT run_id, method, baseline_run_id, num_shards, num_output_tokens, tokens_per_forward,
         tokens_per_s, baseline_tokens_per_s AS none_tokens_per_s, speedup
  FROM v_method_comparison
  WHERE run_id = ? AND baseline_run_id = ?" --param "$RUN" --param "$RUN-none"
echo
echo "== Four samples per prompt: run $RUN-samples4 (specdec) against $RUN-samples4-none"
"$PY" -m specdec.cli sql --db "$DB" "
  SELECT samples, method, num_shards, samples_per_prompt, tokens_per_forward, tokens_per_s,
         baseline_tokens_per_s AS none_tokens_per_s, speedup,
         (SELECT avg(agreement) FROM v_sample_agreement WHERE run_id = ?) AS mean_agreement
  FROM v_samples_speedup
  WHERE samples = 4 AND list_contains(run_ids, ?)" --param "$RUN-samples4" --param "$RUN-samples4"
echo "demo: $(( $(date +%s) - started )) s wall; results in $DB"
