-- Per-shard drafted and accepted tokens by where specdec's drafter found them (own text,
-- cross-request cache, sibling samples, earlier runs' history, live text of running requests).
CREATE TABLE source_stats (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    num_draft_tokens BIGINT NOT NULL,    -- drafted tokens from this source that were verified
    num_accepted_tokens BIGINT NOT NULL,
    PRIMARY KEY (run_id, shard_id, source)
);
