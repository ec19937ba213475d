-- Of specdec_engine_s, the steps begun with a full batch in flight that finished no prompt
-- (0: none, or not counted).
ALTER TABLE pilot_decisions ADD COLUMN specdec_full_batch_s DOUBLE;
