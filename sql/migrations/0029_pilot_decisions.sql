-- Method auto's decisions: per run and shard kind, the engine the kind ran on and what its
-- pilot measured to choose it. none_* and specdec_* are each engine's pass over the pilot
-- sample, NULL where that pass did not run (a kind too small for a pilot runs specdec without one).
CREATE TABLE pilot_decisions (
    run_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,                  -- the shards' folder inside the run's source ('': its top level, or one file)
    ordinal INTEGER NOT NULL,               -- the order in which the run decided its kinds (0 first)
    method VARCHAR NOT NULL,                -- none | specdec: the engine the kind ran on
    reason VARCHAR NOT NULL,                -- the decision in one sentence
    speedup DOUBLE,                         -- specdec / none output tokens per engine-second in the pilot; NULL: no pilot ran
    margin DOUBLE NOT NULL,                 -- the share by which specdec had to beat none to be chosen
    none_num_requests INTEGER,
    none_num_output_tokens BIGINT,
    none_engine_s DOUBLE,                   -- the engine's busy seconds over the pass
    none_start_s DOUBLE,                    -- engine start paid for the pass (0: an engine already running)
    none_tokens_per_s DOUBLE,               -- output tokens per engine-second of the pass
    specdec_num_requests INTEGER,
    specdec_num_output_tokens BIGINT,
    specdec_engine_s DOUBLE,
    specdec_start_s DOUBLE,
    specdec_tokens_per_s DOUBLE,
    PRIMARY KEY (run_id, kind)
);
