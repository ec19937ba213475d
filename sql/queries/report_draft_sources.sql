-- `specdec report`: where accepted draft tokens came from, per run (history: earlier runs).
SELECT run_id, source, num_draft_tokens, num_accepted_tokens, acceptance_rate, share_of_accepted
FROM v_draft_sources
WHERE ? IS NULL OR run_id = ?
ORDER BY run_id, source;
