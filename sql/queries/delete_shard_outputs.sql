-- Remove one shard's rows from outputs before re-inserting them (re-ingest never duplicates).
DELETE FROM outputs WHERE run_id = ? AND shard_id = ?;
