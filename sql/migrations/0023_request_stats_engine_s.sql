-- Engine seconds attributed to each request (its share, by tokens, of every engine step it
-- produced tokens in). NULL: not attributed (rows from before this column, or staged by a
-- worker that does not attribute engine time).
ALTER TABLE request_stats ADD COLUMN engine_s DOUBLE;
