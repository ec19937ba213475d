-- Request statistics written before samples existed: each is sample 0.
INSERT INTO request_stats (run_id, shard_id, id, sample, method, config_hash, num_output_tokens,
                           num_steps, num_drafts, num_draft_tokens, num_accepted_tokens,
                           acceptance_rate, tokens_per_forward, num_fallback_steps,
                           accepted_per_pos, k_histogram)
SELECT run_id, shard_id, id, 0, method, config_hash, num_output_tokens, num_steps, num_drafts,
       num_draft_tokens, num_accepted_tokens, acceptance_rate, tokens_per_forward,
       num_fallback_steps, accepted_per_pos, k_histogram
FROM request_stats_before_samples;
