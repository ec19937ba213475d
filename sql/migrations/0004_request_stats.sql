-- Per-request acceptance figures as the engine really ran them.
CREATE TABLE request_stats (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL,
    num_output_tokens INTEGER NOT NULL,
    num_steps INTEGER NOT NULL,     -- target forwards (prefill included)
    num_drafts INTEGER NOT NULL,
    num_draft_tokens INTEGER NOT NULL,
    num_accepted_tokens INTEGER NOT NULL,
    acceptance_rate DOUBLE NOT NULL,
    mean_accepted_length DOUBLE NOT NULL,  -- output tokens per target forward
    num_fallback_steps INTEGER NOT NULL,
    accepted_per_pos INTEGER[] NOT NULL,
    k_histogram INTEGER[] NOT NULL,        -- index = K chosen, 0 = no draft
    PRIMARY KEY (run_id, shard_id, id)
);
