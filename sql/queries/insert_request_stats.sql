-- Per-request acceptance figures of one shard from the registered Arrow table `staged_results`;
-- engine_s 0 (not attributed, or staged before the column) is stored as NULL.
INSERT INTO request_stats (run_id, shard_id, id, sample, method, config_hash, num_output_tokens,
                           num_steps, num_drafts, num_draft_tokens, num_accepted_tokens,
                           acceptance_rate, tokens_per_forward, num_fallback_steps,
                           accepted_per_pos, k_histogram, engine_s)
SELECT ?, ?, id, sample, method, config_hash, num_output_tokens, num_steps, num_drafts,
       num_draft_tokens, num_accepted_tokens, acceptance_rate, tokens_per_forward,
       num_fallback_steps, accepted_per_pos, k_histogram, nullif(engine_s, 0)
FROM staged_results;
