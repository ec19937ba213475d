-- The output tokens of none's full-batch steps (none_full_batch_s).
ALTER TABLE pilot_decisions ADD COLUMN none_full_batch_tokens BIGINT;
