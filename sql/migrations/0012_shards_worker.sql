-- Which worker (host:pid) generated the shard: shows how a run spread over a work pool.
ALTER TABLE shards ADD COLUMN worker VARCHAR;
