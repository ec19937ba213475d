-- Remove one shard's rows from request_stats before re-inserting them (re-ingest never duplicates).
DELETE FROM request_stats WHERE run_id = ? AND shard_id = ?;
