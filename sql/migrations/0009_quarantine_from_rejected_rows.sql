-- Rows rejected before the quarantine table existed.
INSERT INTO quarantine (run_id, shard_id, row_index, id, stage, reason, num_rows)
SELECT run_id, shard_id, row_index, id, 'validate', reason, 1 FROM rejected_rows;
