-- Where a run's accepted draft tokens came from (specdec): per run and source, the drafted
-- and accepted tokens, the acceptance rate and the source's share of all accepted tokens.
-- `history` is what earlier runs of the same prompts contributed; `sibling` the other
-- samples of the same prompt; `live` the text of requests still running.
CREATE OR REPLACE VIEW v_draft_sources AS
WITH per_source AS (
    SELECT run_id, source, sum(num_draft_tokens) AS num_draft_tokens,
           sum(num_accepted_tokens) AS num_accepted_tokens
    FROM source_stats
    GROUP BY run_id, source
)
SELECT
    run_id,
    source,
    num_draft_tokens,
    num_accepted_tokens,
    num_accepted_tokens / nullif(num_draft_tokens, 0) AS acceptance_rate,
    num_accepted_tokens / nullif(sum(num_accepted_tokens) OVER (PARTITION BY run_id), 0) AS share_of_accepted
FROM per_source;
