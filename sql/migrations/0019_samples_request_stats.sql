-- request_stats keyed by sample: one row per (id, sample), each sample a request of its own.
CREATE TABLE request_stats (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    sample INTEGER NOT NULL DEFAULT 0,      -- which of the row's samples
    method VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL,
    num_output_tokens INTEGER NOT NULL,
    num_steps INTEGER NOT NULL,
    num_drafts INTEGER NOT NULL,
    num_draft_tokens INTEGER NOT NULL,
    num_accepted_tokens INTEGER NOT NULL,
    acceptance_rate DOUBLE NOT NULL,
    tokens_per_forward DOUBLE NOT NULL,
    num_fallback_steps INTEGER NOT NULL,
    accepted_per_pos INTEGER[] NOT NULL,
    k_histogram INTEGER[] NOT NULL,
    PRIMARY KEY (run_id, shard_id, id, sample)
);
