-- Outputs whose id was quarantined as a cross-shard duplicate of the run.
DELETE FROM outputs
WHERE run_id = ? AND (shard_id, id) IN (SELECT shard_id, id FROM quarantine WHERE run_id = ? AND stage = 'dedupe');
