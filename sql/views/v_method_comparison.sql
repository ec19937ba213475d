-- Runs over the same prompts (shards with equal content fingerprints) against a run of the
-- same shards without speculation (method 'none'): speed-up in tokens/s.
CREATE OR REPLACE VIEW v_method_comparison AS
WITH per_shard AS (
    SELECT s.fingerprint, s.run_id, r.method, s.num_output_tokens, s.num_steps, s.generate_s
    FROM shards AS s
    JOIN runs AS r USING (run_id)
    WHERE s.status = 'ingested'
)
SELECT
    a.run_id,
    a.method,
    b.run_id AS baseline_run_id,
    count(*) AS num_shards,
    sum(a.num_output_tokens) AS num_output_tokens,
    sum(a.num_output_tokens) / nullif(sum(a.num_steps), 0) AS tokens_per_forward,
    sum(a.num_output_tokens) / nullif(sum(a.generate_s), 0) AS tokens_per_s,
    sum(b.num_output_tokens) / nullif(sum(b.generate_s), 0) AS baseline_tokens_per_s,
    (sum(a.num_output_tokens) / nullif(sum(a.generate_s), 0))
        / nullif(sum(b.num_output_tokens) / nullif(sum(b.generate_s), 0), 0) AS speedup
FROM per_shard AS a
JOIN per_shard AS b ON a.fingerprint = b.fingerprint AND a.run_id <> b.run_id AND b.method = 'none'
GROUP BY a.run_id, a.method, b.run_id;
