-- Remove one shard's quarantine rows before re-inserting them (re-ingest never duplicates).
DELETE FROM quarantine WHERE run_id = ? AND shard_id = ?;
