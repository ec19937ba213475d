-- Speed-up against runs without speculation (method 'none') over the same shards (equal
-- content fingerprints) and the same samples setting, per samples setting (the run's
-- `samples`; rows with their own count show in samples_per_prompt) and method. speedup and
-- speedup_basis follow v_method_comparison: tokens per engine-second where every paired
-- shard has engine_s, else tokens per shard generate second.
CREATE OR REPLACE VIEW v_samples_speedup AS
WITH per_shard AS (
    SELECT s.fingerprint, s.run_id, s.shard_id, r.method,
           coalesce(TRY_CAST(r.config->>'$.params.samples' AS INTEGER), 1) AS samples,
           s.num_prompts, s.num_output_tokens, s.num_steps, s.generate_s, s.engine_s
    FROM shards AS s
    JOIN runs AS r USING (run_id)
    WHERE s.status = 'ingested'
), requests AS (
    SELECT run_id, shard_id, count(*) AS num_requests FROM outputs GROUP BY run_id, shard_id
), pairs AS (
    SELECT a.samples, a.method, a.run_id, b.run_id AS baseline_run_id, a.num_prompts,
           coalesce(q.num_requests, 0) AS num_requests, a.num_output_tokens, a.num_steps,
           a.generate_s, a.engine_s, b.num_output_tokens AS baseline_output_tokens,
           b.generate_s AS baseline_generate_s, b.engine_s AS baseline_engine_s
    FROM per_shard AS a
    JOIN per_shard AS b
        ON a.fingerprint = b.fingerprint AND a.run_id <> b.run_id AND a.samples = b.samples
        AND b.method = 'none' AND a.method <> 'none'
    LEFT JOIN requests AS q ON q.run_id = a.run_id AND q.shard_id = a.shard_id
), per_setting AS (
    SELECT
        samples,
        method,
        count(DISTINCT run_id) AS num_runs,
        list(DISTINCT run_id ORDER BY run_id) AS run_ids,
        count(*) AS num_shards,
        sum(num_requests) / nullif(sum(num_prompts), 0) AS samples_per_prompt,
        sum(num_output_tokens) / nullif(sum(num_steps), 0) AS tokens_per_forward,
        sum(num_output_tokens) / nullif(sum(generate_s), 0) AS tokens_per_s,
        sum(baseline_output_tokens) / nullif(sum(baseline_generate_s), 0) AS baseline_tokens_per_s,
        count(engine_s) = count(*) AND count(baseline_engine_s) = count(*) AS engine_s_known,
        sum(num_output_tokens) / nullif(sum(engine_s), 0) AS tokens_per_engine_s,
        sum(baseline_output_tokens) / nullif(sum(baseline_engine_s), 0) AS baseline_tokens_per_engine_s
    FROM pairs
    GROUP BY samples, method
)
SELECT
    samples,
    method,
    num_runs,
    run_ids,
    num_shards,
    samples_per_prompt,
    tokens_per_forward,
    tokens_per_s,
    baseline_tokens_per_s,
    CASE WHEN engine_s_known THEN tokens_per_engine_s END AS tokens_per_engine_s,
    CASE WHEN engine_s_known THEN baseline_tokens_per_engine_s END AS baseline_tokens_per_engine_s,
    CASE WHEN engine_s_known THEN tokens_per_engine_s / nullif(baseline_tokens_per_engine_s, 0)
         ELSE tokens_per_s / nullif(baseline_tokens_per_s, 0) END AS speedup,
    CASE WHEN engine_s_known THEN 'engine_s' ELSE 'generate_s' END AS speedup_basis
FROM per_setting;
