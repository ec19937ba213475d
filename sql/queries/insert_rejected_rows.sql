-- Rejected input rows of one shard from the registered Arrow table `staged_rejected`.
INSERT INTO rejected_rows (run_id, shard_id, row_index, id, reason)
SELECT ?, ?, row_index, id, reason FROM staged_rejected;
