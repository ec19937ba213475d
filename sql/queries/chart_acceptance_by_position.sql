-- Chart (tasks/charts.py): acceptance by draft position, one line per run with speculation
-- (method 'none' drafts nothing). position: 1 = the first drafted token. All runs, or the one
-- given (twice).
SELECT a.run_id, a.pos + 1 AS position, a.acceptance_rate, a.conditional_rate
FROM v_acceptance_by_position AS a
JOIN runs AS r USING (run_id)
WHERE (? IS NULL OR a.run_id = ?) AND r.method <> 'none' AND a.num_drafts > 0
ORDER BY a.run_id, a.pos;
