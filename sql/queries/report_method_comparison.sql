-- `specdec report`: speed-up against a run of the same shards without speculation (on the
-- basis named), and both runs' wall-clock throughput.
SELECT run_id, method, baseline_run_id, num_shards, tokens_per_forward, tokens_per_s,
       baseline_tokens_per_s, tokens_per_engine_s, baseline_tokens_per_engine_s, speedup,
       speedup_basis, run_tokens_per_s, baseline_run_tokens_per_s
FROM v_method_comparison
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, baseline_run_id;
