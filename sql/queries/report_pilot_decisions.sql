-- `specdec report`: method auto's engine per shard kind, what the pilot measured, what the kind then did.
SELECT d.run_id, d.kind, d.method, d.speedup, d.pilot_requests, d.pilot_basis, d.pilot_none_tokens_per_s,
       d.pilot_specdec_tokens_per_s, d.shards_done, d.num_prompts, d.num_output_tokens, d.tokens_per_engine_s
FROM v_pilot_decisions AS d
JOIN runs AS r USING (run_id)
WHERE ? IS NULL OR d.run_id = ?
ORDER BY r.started_at, d.run_id, d.ordinal;
