-- Each benchmark row against `none` on the same bench, engine, dataset, batch size and K:
-- tokens/s speed-up (real engine) and tokens per forward.
CREATE OR REPLACE VIEW v_bench_speedup AS
SELECT
    b.bench_id,
    b.engine,
    b.dataset,
    b.batch_size,
    b.k_max,
    b.method,
    b.tokens_per_forward,
    b.acceptance_rate,
    b.tokens_per_s,
    b.tokens_per_s / NULLIF(n.tokens_per_s, 0) AS speedup_vs_none,
    b.outputs_identical_to_none
FROM bench_results AS b
LEFT JOIN bench_results AS n
    ON n.bench_id = b.bench_id AND n.engine = b.engine AND n.dataset = b.dataset
    AND n.batch_size = b.batch_size AND n.k_max = b.k_max AND n.method = 'none';
