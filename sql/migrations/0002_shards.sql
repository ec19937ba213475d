-- One row per (run, shard): where it came from, its content fingerprint, status and timings.
CREATE TABLE shards (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    source_path VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL,
    status VARCHAR NOT NULL,        -- ingested | failed
    error VARCHAR,
    num_prompts INTEGER NOT NULL,
    num_rejected INTEGER NOT NULL,
    num_output_tokens BIGINT NOT NULL,
    num_steps BIGINT NOT NULL,
    num_drafts BIGINT NOT NULL,
    num_draft_tokens BIGINT NOT NULL,
    num_accepted_tokens BIGINT NOT NULL,
    read_s DOUBLE,
    engine_start_s DOUBLE,
    generate_s DOUBLE,
    stage_s DOUBLE,
    ingest_s DOUBLE,
    generated_at TIMESTAMP,
    ingested_at TIMESTAMP,
    PRIMARY KEY (run_id, shard_id)
);
