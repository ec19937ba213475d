-- Per-request acceptance figures of one shard from the registered Arrow table `staged_results`.
INSERT INTO request_stats (run_id, shard_id, id, sample, method, config_hash, num_output_tokens,
                           num_steps, num_drafts, num_draft_tokens, num_accepted_tokens,
                           acceptance_rate, tokens_per_forward, num_fallback_steps,
                           accepted_per_pos, k_histogram)
SELECT ?, ?, id, sample, method, config_hash, num_output_tokens, num_steps, num_drafts,
       num_draft_tokens, num_accepted_tokens, acceptance_rate, tokens_per_forward,
       num_fallback_steps, accepted_per_pos, k_histogram
FROM staged_results;
