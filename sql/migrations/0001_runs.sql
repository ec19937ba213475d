-- One row per pipeline run; `config` is the configuration actually used (no secrets).
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    run_name VARCHAR,
    flow_run_id VARCHAR,
    source VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    config_hash VARCHAR NOT NULL,
    config JSON NOT NULL,
    status VARCHAR NOT NULL,        -- running | completed | failed
    num_shards INTEGER,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    wall_s DOUBLE,
    engine_start_s DOUBLE,
    message VARCHAR,
    updated_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
