-- Quarantined input of one shard from the registered Arrow table `staged_quarantine`.
INSERT INTO quarantine (run_id, shard_id, row_index, id, stage, reason, num_rows)
SELECT ?, ?, row_index, id, stage, reason, num_rows FROM staged_quarantine;
