-- Runs over the same prompts (shards with equal content fingerprints) against a run of the
-- same shards without speculation (method 'none').
-- speedup: the ratio of tokens per engine-second (output tokens / attributed engine seconds,
-- true when shards share an engine) where every paired shard of both runs has engine_s
-- (speedup_basis 'engine_s'); otherwise, for older runs and the sequential worker, the ratio
-- of tokens per shard generate second (speedup_basis 'generate_s'). run_tokens_per_s: a
-- run's wall-clock throughput, all its output tokens over its wall time less engine start.
CREATE OR REPLACE VIEW v_method_comparison AS
WITH per_shard AS (
    SELECT s.fingerprint, s.run_id, r.method, s.num_output_tokens, s.num_steps, s.generate_s, s.engine_s
    FROM shards AS s
    JOIN runs AS r USING (run_id)
    WHERE s.status = 'ingested'
), per_run AS (
    SELECT r.run_id,
           sum(s.num_output_tokens) / nullif(any_value(r.wall_s) - coalesce(any_value(r.engine_start_s), 0), 0)
               AS run_tokens_per_s
    FROM runs AS r
    JOIN shards AS s USING (run_id)
    WHERE s.status = 'ingested'
    GROUP BY r.run_id
), pairs AS (
    SELECT
        a.run_id,
        a.method,
        b.run_id AS baseline_run_id,
        count(*) AS num_shards,
        sum(a.num_output_tokens) AS num_output_tokens,
        sum(a.num_output_tokens) / nullif(sum(a.num_steps), 0) AS tokens_per_forward,
        sum(a.num_output_tokens) / nullif(sum(a.generate_s), 0) AS tokens_per_s,
        sum(b.num_output_tokens) / nullif(sum(b.generate_s), 0) AS baseline_tokens_per_s,
        count(a.engine_s) = count(*) AND count(b.engine_s) = count(*) AS engine_s_known,
        sum(a.num_output_tokens) / nullif(sum(a.engine_s), 0) AS tokens_per_engine_s,
        sum(b.num_output_tokens) / nullif(sum(b.engine_s), 0) AS baseline_tokens_per_engine_s
    FROM per_shard AS a
    JOIN per_shard AS b ON a.fingerprint = b.fingerprint AND a.run_id <> b.run_id AND b.method = 'none'
    GROUP BY a.run_id, a.method, b.run_id
)
SELECT
    p.run_id,
    p.method,
    p.baseline_run_id,
    p.num_shards,
    p.num_output_tokens,
    p.tokens_per_forward,
    p.tokens_per_s,
    p.baseline_tokens_per_s,
    CASE WHEN p.engine_s_known THEN p.tokens_per_engine_s END AS tokens_per_engine_s,
    CASE WHEN p.engine_s_known THEN p.baseline_tokens_per_engine_s END AS baseline_tokens_per_engine_s,
    CASE WHEN p.engine_s_known THEN p.tokens_per_engine_s / nullif(p.baseline_tokens_per_engine_s, 0)
         ELSE p.tokens_per_s / nullif(p.baseline_tokens_per_s, 0) END AS speedup,
    CASE WHEN p.engine_s_known THEN 'engine_s' ELSE 'generate_s' END AS speedup_basis,
    ra.run_tokens_per_s,
    rb.run_tokens_per_s AS baseline_run_tokens_per_s,
    ra.run_tokens_per_s / nullif(rb.run_tokens_per_s, 0) AS run_speedup
FROM pairs AS p
LEFT JOIN per_run AS ra ON ra.run_id = p.run_id
LEFT JOIN per_run AS rb ON rb.run_id = p.baseline_run_id;
