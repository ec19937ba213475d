-- Samples per prompt key outputs by (run, shard, id, sample). DuckDB cannot change a primary
-- key in place, so the table is rebuilt: this moves the old one aside, 0015 creates the new
-- one, 0016 copies the rows over as sample 0 of 1, 0017 drops the old one.
ALTER TABLE outputs RENAME TO outputs_before_samples;
