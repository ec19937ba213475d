-- Remove one shard's rows from source_stats before re-inserting them (re-ingest never duplicates).
DELETE FROM source_stats WHERE run_id = ? AND shard_id = ?;
