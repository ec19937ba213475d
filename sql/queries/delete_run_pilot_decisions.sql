-- Remove a run's pilot decisions before re-inserting those of its manifest (re-ingest never duplicates).
DELETE FROM pilot_decisions WHERE run_id = ?;
