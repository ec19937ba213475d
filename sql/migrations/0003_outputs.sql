-- One row per request: the completion and its token counts.
CREATE TABLE outputs (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    completion VARCHAR NOT NULL,
    output_token_ids INTEGER[] NOT NULL,
    num_output_tokens INTEGER NOT NULL,
    finish_reason VARCHAR,
    PRIMARY KEY (run_id, shard_id, id)
);
