-- The demo's final table: per shard kind, the speculating run (auto, or specdec) against `none`
-- on the same shards. $1: the demo's run-name prefix (runs <prefix>-<kind> and <prefix>-<kind>-none).
-- speedup: the ratio of tokens per engine-second (v_method_comparison); run_speedup: the runs' wall-clock
-- throughput (output tokens over wall time less engine start), Prefect's per-run work included.
SELECT substr(c.run_id, length($1) + 2) AS shard_kind,
       s.num_prompts AS prompts,
       c.num_output_tokens AS tokens,
       s.acceptance_rate AS acceptance,
       c.tokens_per_forward,
       c.speedup,
       c.run_tokens_per_s,
       c.baseline_run_tokens_per_s AS none_run_tokens_per_s,
       c.run_speedup
FROM v_method_comparison AS c
JOIN v_run_summary AS s USING (run_id)
WHERE c.method <> 'none' AND starts_with(c.run_id, $1 || '-') AND c.baseline_run_id = c.run_id || '-none'
ORDER BY c.speedup DESC;
