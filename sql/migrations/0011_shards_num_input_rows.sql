-- Rows in the input shard (NULL when it could not be read): input = outputs + quarantined.
ALTER TABLE shards ADD COLUMN num_input_rows BIGINT;
