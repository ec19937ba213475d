-- Remove one shard's rows from shards before re-inserting them (re-ingest never duplicates).
DELETE FROM shards WHERE run_id = ? AND shard_id = ?;
