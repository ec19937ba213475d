-- Chart (tasks/charts.py): each run over its course, one point per shard in the order shards
-- finished generating: seconds since the run started; the run's throughput so far (its output
-- tokens so far over the seconds so far less engine start, as v_run_summary's run_tokens_per_s
-- counts the whole run); and the shard's tokens per target forward. All runs, or the one given (twice).
WITH done AS (
    SELECT s.run_id, s.shard_id, s.num_output_tokens, s.num_steps,
           epoch(s.generated_at - r.started_at) AS elapsed_s, coalesce(r.engine_start_s, 0) AS engine_start_s
    FROM shards AS s
    JOIN runs AS r USING (run_id)
    WHERE s.status = 'ingested' AND s.generated_at IS NOT NULL AND r.started_at IS NOT NULL
      AND (? IS NULL OR s.run_id = ?)
)
SELECT run_id,
       elapsed_s,
       sum(num_output_tokens) OVER so_far / nullif(greatest(elapsed_s - engine_start_s, 0), 0) AS run_tokens_per_s,
       num_output_tokens / nullif(num_steps, 0) AS tokens_per_forward
FROM done
WINDOW so_far AS (PARTITION BY run_id ORDER BY elapsed_s, shard_id ROWS UNBOUNDED PRECEDING)
ORDER BY run_id, elapsed_s, shard_id;
