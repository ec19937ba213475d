-- What vLLM resolved for the engine that generated the shard (parallelism, KV-cache sizing,
-- quantization, prefix caching, batched tokens...): what reached the engine, whichever path
-- started it. NULL: not recorded (rows from before this column, a failed shard).
ALTER TABLE shards ADD COLUMN engine JSON;
