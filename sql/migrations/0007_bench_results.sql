-- One row per (method, engine, dataset, batch size, K) measured by `specdec bench`.
CREATE TABLE bench_results (
    bench_id VARCHAR NOT NULL,          -- one `specdec bench` invocation
    recorded_at TIMESTAMP NOT NULL,
    method VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,            -- replay | vllm
    dataset VARCHAR NOT NULL,
    batch_size INTEGER NOT NULL,
    k_max INTEGER NOT NULL,
    num_requests INTEGER NOT NULL,
    tokens_per_forward DOUBLE NOT NULL,
    acceptance_rate DOUBLE NOT NULL,
    tokens_per_s DOUBLE,                -- real engine only
    outputs_identical_to_none BOOLEAN,
    started_from VARCHAR NOT NULL,
    PRIMARY KEY (bench_id, method, engine, dataset, batch_size, k_max)
);
