-- `specdec report`: per-shard acceptance and throughput.
SELECT run_id, shard_id, status, num_prompts, num_rejected, num_output_tokens, acceptance_rate,
       tokens_per_forward, generate_s, tokens_per_s, engine_s, tokens_per_engine_s
FROM v_shard_acceptance
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, shard_id;
