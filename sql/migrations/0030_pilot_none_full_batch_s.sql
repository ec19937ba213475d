-- Of none_engine_s, the steps begun with a full batch in flight that finished no prompt (0:
-- none, or not counted). Where both passes have some, the decision compared the passes on these
-- steps (v_pilot_decisions.pilot_basis 'full-batch steps'), else on the whole passes.
ALTER TABLE pilot_decisions ADD COLUMN none_full_batch_s DOUBLE;
