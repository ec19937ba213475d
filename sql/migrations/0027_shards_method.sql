-- The method that generated the shard: the run's own, or under method auto the engine its
-- kind's pilot chose (none | specdec). NULL: not recorded (rows from before this column).
ALTER TABLE shards ADD COLUMN method VARCHAR;
