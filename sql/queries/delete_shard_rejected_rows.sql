-- Remove one shard's rows from rejected_rows before re-inserting them (re-ingest never duplicates).
DELETE FROM rejected_rows WHERE run_id = ? AND shard_id = ?;
