INSERT OR REPLACE INTO bench_results
    (bench_id, recorded_at, method, engine, dataset, batch_size, k_max, num_requests,
     tokens_per_forward, acceptance_rate, tokens_per_s, outputs_identical_to_none, started_from)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
