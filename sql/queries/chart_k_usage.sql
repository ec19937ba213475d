-- Chart (tasks/charts.py): the speculation length K chosen per step, as a share of each run's
-- steps (K = 0: a step without a draft). Runs without speculation (method 'none', every step
-- K = 0) are left out. All runs, or the one given (twice).
SELECT k.run_id, k.k, k.share
FROM v_k_usage AS k
JOIN runs AS r USING (run_id)
WHERE (? IS NULL OR k.run_id = ?) AND r.method <> 'none'
ORDER BY k.run_id, k.k;
