-- Input that did not become an output, with the reason: one row per rejected input row
-- (row_index set, num_rows = 1), or one row for a whole shard that could not be used
-- (row_index NULL, num_rows = the shard's row count, NULL when the file is unreadable).
-- stage: read (shard-level), validate (row checks), tokenize (too long), dedupe (id seen in
-- an earlier shard of the run). Replaces rejected_rows (copied over by 0009).
CREATE TABLE quarantine (
    run_id VARCHAR NOT NULL,
    shard_id VARCHAR NOT NULL,
    row_index INTEGER,
    id VARCHAR,
    stage VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    num_rows BIGINT,
    quarantined_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
