-- The shard's kind: its folder inside the run's source ('' for the top level or a single
-- file), the unit method auto's pilot decides for. NULL: not recorded (rows from before this column).
ALTER TABLE shards ADD COLUMN kind VARCHAR;
