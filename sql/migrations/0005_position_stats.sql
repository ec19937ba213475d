-- Per-shard acceptance by draft position (0 = first drafted token).
CREATE TABLE position_stats (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    pos INTEGER NOT NULL,
    num_accepted_tokens BIGINT NOT NULL,
    num_drafts BIGINT NOT NULL,     -- drafts of the shard (vLLM's denominator per position)
    PRIMARY KEY (run_id, shard_id, pos)
);
