-- Request statistics of the outputs removed as cross-shard duplicates.
DELETE FROM request_stats
WHERE run_id = ? AND (shard_id, id) IN (SELECT shard_id, id FROM quarantine WHERE run_id = ? AND stage = 'dedupe');
