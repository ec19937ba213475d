-- What the pilot's decision compared: 'full-batch steps', each pass's output tokens per second
-- of the steps begun with a full batch in flight that finished no prompt (the *_full_batch_*
-- columns, 0031-0034), where both passes had such steps; else 'whole shares', per engine-second
-- of the whole pass (*_tokens_per_s). NULL: no pilot ran, or it was decided before this column
-- (on whole shares).
ALTER TABLE pilot_decisions ADD COLUMN basis VARCHAR;
