-- A shard's engine seconds: the sum of its requests' engine_s. NULL: not attributed (rows
-- from before this column, or a shard with output tokens staged without attribution).
ALTER TABLE shards ADD COLUMN engine_s DOUBLE;
