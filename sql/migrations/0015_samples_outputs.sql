-- outputs keyed by sample: one row per (id, sample), each sample a request of its own.
CREATE TABLE outputs (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    sample INTEGER NOT NULL DEFAULT 0,      -- which of the row's samples (0 .. num_samples - 1)
    num_samples INTEGER NOT NULL DEFAULT 1, -- samples the row asked for
    completion VARCHAR NOT NULL,
    output_token_ids INTEGER[] NOT NULL,
    num_output_tokens INTEGER NOT NULL,
    finish_reason VARCHAR,
    PRIMARY KEY (run_id, shard_id, id, sample)
);
