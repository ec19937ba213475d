-- Remove one shard's rows from position_stats before re-inserting them (re-ingest never duplicates).
DELETE FROM position_stats WHERE run_id = ? AND shard_id = ?;
