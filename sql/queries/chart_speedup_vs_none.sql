-- Chart (tasks/charts.py): each run's speed-up against a run of the same shards without
-- speculation (v_method_comparison): per run, i.e. per shard kind or source, as runs are
-- split (the demo runs one per kind). label: the run, and its baseline where it has several.
-- All runs, or the pairs the one given takes part in (twice).
SELECT run_id || CASE WHEN count(*) OVER (PARTITION BY run_id) > 1 THEN ' vs ' || baseline_run_id ELSE '' END
           AS label,
       speedup, speedup_basis, run_speedup
FROM v_method_comparison
WHERE (? IS NULL OR ? IN (run_id, baseline_run_id)) AND method <> 'none' AND speedup IS NOT NULL
ORDER BY run_id, baseline_run_id;
