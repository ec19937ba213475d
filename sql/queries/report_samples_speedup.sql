-- `specdec report`: speed-up against runs without speculation, per samples setting.
SELECT samples, method, num_runs, num_shards, samples_per_prompt, tokens_per_forward, tokens_per_s,
       baseline_tokens_per_s, tokens_per_engine_s, baseline_tokens_per_engine_s, speedup,
       speedup_basis
FROM v_samples_speedup
WHERE ? IS NULL OR list_contains(run_ids, ?)
ORDER BY samples, method;
