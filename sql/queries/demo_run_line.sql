-- One demo run's progress line: shards done, rows, tokens, wall-clock throughput. $1: run id.
SELECT shards_done, num_shards, num_prompts, num_output_tokens, run_tokens_per_s, wall_s, engine_start_s
FROM v_run_summary
WHERE run_id = $1;
