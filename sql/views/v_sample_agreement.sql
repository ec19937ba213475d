-- Per prompt (run, shard, id) with its samples: how many, how many distinct completions,
-- the share of samples that gave the most common one (1.0: all agree), and tokens per
-- target forward and acceptance rate over the samples together.
CREATE OR REPLACE VIEW v_sample_agreement AS
WITH per_completion AS (
    SELECT run_id, shard_id, id, completion, count(*) AS num_same
    FROM outputs
    GROUP BY run_id, shard_id, id, completion
), per_prompt AS (
    SELECT run_id, shard_id, id, sum(num_same) AS num_samples, count(*) AS distinct_completions,
           max(num_same) AS most_common
    FROM per_completion
    GROUP BY run_id, shard_id, id
), speed AS (
    SELECT run_id, shard_id, id,
           sum(num_output_tokens) / nullif(sum(num_steps), 0) AS tokens_per_forward,
           sum(num_accepted_tokens) / nullif(sum(num_draft_tokens), 0) AS acceptance_rate
    FROM request_stats
    GROUP BY run_id, shard_id, id
)
SELECT
    p.run_id,
    p.shard_id,
    p.id,
    CAST(p.num_samples AS BIGINT) AS num_samples,
    p.distinct_completions,
    p.most_common / p.num_samples AS agreement,
    s.tokens_per_forward,
    s.acceptance_rate
FROM per_prompt AS p
LEFT JOIN speed AS s USING (run_id, shard_id, id);
