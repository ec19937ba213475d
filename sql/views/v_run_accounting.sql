-- Every input row is accounted for: input rows = output rows + quarantined rows, per run,
-- and every output row has all its samples: output samples = the samples its rows asked for
-- (outputs holds one row per (id, sample); output_rows counts the input rows among them).
-- A shard that could not be read at all has no known row count: it is counted in
-- shards_unreadable (and named in quarantine), and left out of the row balance.
CREATE OR REPLACE VIEW v_run_accounting AS
WITH inputs AS (
    SELECT run_id, count(*) AS num_shards,
           count(*) FILTER (WHERE num_input_rows IS NULL) AS shards_unreadable,
           coalesce(CAST(sum(num_input_rows) AS BIGINT), 0) AS input_rows
    FROM shards GROUP BY run_id
), per_row AS (
    SELECT run_id, shard_id, id, count(*) AS num_outputs, max(num_samples) AS num_samples
    FROM outputs GROUP BY run_id, shard_id, id
), outs AS (
    SELECT run_id, count(*) AS output_rows,
           CAST(sum(num_outputs) AS BIGINT) AS output_samples,
           CAST(sum(num_samples) AS BIGINT) AS expected_samples
    FROM per_row GROUP BY run_id
), quarantined AS (
    SELECT run_id,
           coalesce(CAST(sum(num_rows) AS BIGINT), 0) AS quarantined_rows,
           count(*) FILTER (WHERE row_index IS NULL AND stage = 'read') AS shards_quarantined
    FROM quarantine GROUP BY run_id
)
SELECT
    i.run_id,
    i.num_shards,
    coalesce(q.shards_quarantined, 0) AS shards_quarantined,
    i.shards_unreadable,
    i.input_rows,
    coalesce(o.output_rows, 0) AS output_rows,
    coalesce(q.quarantined_rows, 0) AS quarantined_rows,
    coalesce(o.output_samples, 0) AS output_samples,
    coalesce(o.expected_samples, 0) AS expected_samples,
    i.input_rows = coalesce(o.output_rows, 0) + coalesce(q.quarantined_rows, 0)
        AND coalesce(o.output_samples, 0) = coalesce(o.expected_samples, 0) AS balanced
FROM inputs AS i
LEFT JOIN outs AS o USING (run_id)
LEFT JOIN quarantined AS q USING (run_id);
