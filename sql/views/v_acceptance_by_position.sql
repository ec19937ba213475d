-- Acceptance by draft position per run: accepted at position i / drafts (vLLM's convention),
-- and the conditional rate given position i-1 was accepted.
CREATE OR REPLACE VIEW v_acceptance_by_position AS
WITH per_pos AS (
    SELECT run_id, pos, sum(num_accepted_tokens) AS num_accepted_tokens, sum(num_drafts) AS num_drafts
    FROM position_stats
    GROUP BY run_id, pos
)
SELECT
    run_id,
    pos,
    num_accepted_tokens,
    num_drafts,
    num_accepted_tokens / nullif(num_drafts, 0) AS acceptance_rate,
    num_accepted_tokens / nullif(
        lag(num_accepted_tokens, 1, num_drafts) OVER (PARTITION BY run_id ORDER BY pos), 0
    ) AS conditional_rate
FROM per_pos;
