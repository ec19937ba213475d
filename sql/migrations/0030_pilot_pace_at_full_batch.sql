-- The pilot's pace is taken over the steps that ran a full batch (a share's drain left out):
-- what none_tokens_per_s and specdec_tokens_per_s hold from here on, and what the decision compares.
COMMENT ON TABLE pilot_decisions IS
    'method auto''s decisions; none_/specdec_tokens_per_s: output tokens per engine-second over the pass''s steps at full batch (decisions recorded before migration 0030: over the whole pass)';
