-- An id already output by an earlier shard (by shard_id order) of the same run: the later
-- copies are quarantined (then removed from outputs, every sample), so each id is output
-- exactly once. One quarantine row per row, however many samples it had.
-- Shard-level figures (shards, position_stats) keep counting them: the engine did that work.
INSERT INTO quarantine (run_id, shard_id, row_index, id, stage, reason, num_rows)
SELECT DISTINCT o.run_id, o.shard_id, NULL, o.id, 'dedupe',
       'duplicate id ' || o.id || ': already in shard ' || d.first_shard_id, 1
FROM outputs AS o
JOIN (
    SELECT id, min(shard_id) AS first_shard_id
    FROM outputs
    WHERE run_id = ?
    GROUP BY id
    HAVING count(DISTINCT shard_id) > 1
) AS d ON o.id = d.id AND o.shard_id > d.first_shard_id
WHERE o.run_id = ?;
