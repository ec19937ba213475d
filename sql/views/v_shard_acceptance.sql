-- Per-shard acceptance, tokens per target forward and throughput: per generate second (the
-- shard's own wall time, which overlaps other shards' when they share an engine) and per
-- attributed engine second (NULL where the worker did not attribute engine time).
CREATE OR REPLACE VIEW v_shard_acceptance AS
SELECT
    s.run_id,
    s.shard_id,
    r.method,
    s.status,
    s.num_prompts,
    s.num_rejected,
    s.num_output_tokens,
    s.num_draft_tokens,
    s.num_accepted_tokens,
    s.num_accepted_tokens / nullif(s.num_draft_tokens, 0) AS acceptance_rate,
    s.num_output_tokens / nullif(s.num_steps, 0) AS tokens_per_forward,
    s.generate_s,
    s.num_output_tokens / nullif(s.generate_s, 0) AS tokens_per_s,
    s.engine_s,
    s.num_output_tokens / nullif(s.engine_s, 0) AS tokens_per_engine_s,
    s.source_path
FROM shards AS s
JOIN runs AS r USING (run_id);
