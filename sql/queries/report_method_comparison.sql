-- `specdec report`: speed-up against a run of the same shards without speculation.
SELECT run_id, method, baseline_run_id, num_shards, tokens_per_forward, tokens_per_s,
       baseline_tokens_per_s, speedup
FROM v_method_comparison
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, baseline_run_id;
