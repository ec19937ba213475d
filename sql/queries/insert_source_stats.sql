-- One shard's drafted and accepted tokens from one draft source.
INSERT INTO source_stats (run_id, shard_id, source, num_draft_tokens, num_accepted_tokens)
VALUES (?, ?, ?, ?, ?);
