-- `specdec report`: run summary (all runs, or the one given).
SELECT run_id, method, status, shards_done, shards_failed, num_prompts, num_output_tokens,
       acceptance_rate, tokens_per_forward, tokens_per_s, tokens_per_engine_s, run_tokens_per_s,
       wall_s, engine_start_s, engine_busy_s, outside_generation_share
FROM v_run_summary
WHERE ? IS NULL OR run_id = ?
ORDER BY started_at, run_id;
