-- Input rows that failed validation, with the reason (the shard's other rows still run).
CREATE TABLE rejected_rows (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    row_index INTEGER NOT NULL,
    id VARCHAR,
    reason VARCHAR NOT NULL,
    PRIMARY KEY (run_id, shard_id, row_index)
);
