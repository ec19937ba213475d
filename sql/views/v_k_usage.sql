-- How often each speculation length K was chosen per run (K = 0: step without a draft).
CREATE OR REPLACE VIEW v_k_usage AS
WITH steps AS (
    SELECT
        run_id,
        unnest(generate_series(0, len(k_histogram) - 1)) AS k,
        unnest(k_histogram) AS num_steps
    FROM request_stats
)
SELECT
    run_id,
    k,
    sum(num_steps) AS num_steps,
    sum(num_steps) / nullif(sum(sum(num_steps)) OVER (PARTITION BY run_id), 0) AS share
FROM steps
GROUP BY run_id, k;
