#!/usr/bin/env bash
# The demo on bundled defaults: a sample HumanEval shard through vLLM with our proposer.
set -euo pipefail
PY=${1:-.venv/bin/python}
mkdir -p out/demo
"$PY" -m specdec.cli sample --dataset humaneval --limit 16 --output out/demo/prompts/humaneval-000.parquet
"$PY" -m specdec.cli generate --input out/demo/prompts/humaneval-000.parquet \
  --output out/demo/completions.parquet --method specdec --max-tokens 96 --batch-size 16
