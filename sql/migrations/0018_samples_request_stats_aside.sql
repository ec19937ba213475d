-- Samples per prompt key request_stats by (run, shard, id, sample), rebuilt as outputs was
-- (0014-0017): this moves the old table aside, 0019 creates the new one, 0020 copies the
-- rows over as sample 0, 0021 drops the old one.
ALTER TABLE request_stats RENAME TO request_stats_before_samples;
