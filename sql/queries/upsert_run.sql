-- Insert or update a run record (from the staged run manifest).
INSERT INTO runs (run_id, run_name, flow_run_id, source, method, config_hash, config, status,
                  num_shards, started_at, finished_at, wall_s, engine_start_s, message, engine_busy_s,
                  updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())
ON CONFLICT (run_id) DO UPDATE SET
    run_name = excluded.run_name,
    flow_run_id = excluded.flow_run_id,
    source = excluded.source,
    method = excluded.method,
    config_hash = excluded.config_hash,
    config = excluded.config,
    status = excluded.status,
    num_shards = excluded.num_shards,
    started_at = excluded.started_at,
    finished_at = excluded.finished_at,
    wall_s = excluded.wall_s,
    engine_start_s = excluded.engine_start_s,
    message = excluded.message,
    engine_busy_s = excluded.engine_busy_s,
    updated_at = now();
