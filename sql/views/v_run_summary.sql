-- One row per run: totals, acceptance, throughput and the share of wall time outside generation.
-- engine_s: the engine seconds attributed to its requests (NULL unless every shard has them);
-- engine_busy_s: the time its engines held requests, which engine_s adds up to;
-- run_tokens_per_s: wall-clock throughput, output tokens over wall time less engine start.
CREATE OR REPLACE VIEW v_run_summary AS
WITH per_run AS (
    SELECT
        run_id,
        count(*) FILTER (WHERE status = 'ingested') AS shards_done,
        count(*) FILTER (WHERE status = 'failed') AS shards_failed,
        sum(num_prompts) AS num_prompts,
        sum(num_output_tokens) AS num_output_tokens,
        sum(num_steps) AS num_steps,
        sum(num_draft_tokens) AS num_draft_tokens,
        sum(num_accepted_tokens) AS num_accepted_tokens,
        sum(generate_s) AS generate_s,
        CASE WHEN count(engine_s) = count(*) THEN sum(engine_s) END AS engine_s,
        sum(read_s + stage_s + coalesce(ingest_s, 0)) AS io_s
    FROM shards
    GROUP BY run_id
)
SELECT
    r.run_id,
    r.run_name,
    r.method,
    r.config_hash,
    r.status,
    r.num_shards,
    coalesce(p.shards_done, 0) AS shards_done,
    coalesce(p.shards_failed, 0) AS shards_failed,
    coalesce(p.num_prompts, 0) AS num_prompts,
    coalesce(p.num_output_tokens, 0) AS num_output_tokens,
    p.num_accepted_tokens / nullif(p.num_draft_tokens, 0) AS acceptance_rate,
    p.num_output_tokens / nullif(p.num_steps, 0) AS tokens_per_forward,
    p.generate_s,
    p.num_output_tokens / nullif(p.generate_s, 0) AS tokens_per_s,
    p.engine_s,
    p.num_output_tokens / nullif(p.engine_s, 0) AS tokens_per_engine_s,
    r.wall_s,
    r.engine_start_s,
    r.engine_busy_s,
    p.num_output_tokens / nullif(r.wall_s - coalesce(r.engine_start_s, 0), 0) AS run_tokens_per_s,
    p.io_s,
    1 - p.generate_s / nullif(r.wall_s, 0) AS outside_generation_share,
    r.started_at,
    r.finished_at
FROM runs AS r
LEFT JOIN per_run AS p USING (run_id);
