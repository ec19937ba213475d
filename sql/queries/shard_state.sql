-- What DuckDB already holds for a shard: lets ingest skip unchanged, already-ingested shards.
SELECT fingerprint, config_hash, status FROM shards WHERE run_id = ? AND shard_id = ?;
