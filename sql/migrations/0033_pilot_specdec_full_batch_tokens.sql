-- The output tokens of specdec's full-batch steps (specdec_full_batch_s).
ALTER TABLE pilot_decisions ADD COLUMN specdec_full_batch_tokens BIGINT;
