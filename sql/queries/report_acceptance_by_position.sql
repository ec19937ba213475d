-- `specdec report`: acceptance by draft position.
SELECT run_id, pos, num_accepted_tokens, num_drafts, acceptance_rate, conditional_rate
FROM v_acceptance_by_position
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, pos;
