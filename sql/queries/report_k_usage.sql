-- `specdec report`: speculation length K chosen per step.
SELECT run_id, k, num_steps, share
FROM v_k_usage
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, k;
