-- Per-position accepted counts of one shard, summed over its requests (`staged_results`).
INSERT INTO position_stats (run_id, shard_id, pos, num_accepted_tokens, num_drafts)
SELECT ?, ?, pos, sum(num_accepted), (SELECT coalesce(sum(num_drafts), 0) FROM staged_results)
FROM (
    SELECT unnest(generate_series(0, len(accepted_per_pos) - 1)) AS pos,
           unnest(accepted_per_pos) AS num_accepted
    FROM staged_results
)
GROUP BY pos;
