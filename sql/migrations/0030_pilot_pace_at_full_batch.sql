-- The pilot's pace is taken over the steps that ran a full batch (a share's drain left out):
-- what each engine's tokens_per_s column holds from here on, and what the decision compares.
COMMENT ON COLUMN pilot_decisions.none_tokens_per_s IS
    'output tokens per engine-second over the pass''s steps at full batch (before 0030: over the whole pass)';
COMMENT ON COLUMN pilot_decisions.specdec_tokens_per_s IS
    'output tokens per engine-second over the pass''s steps at full batch (before 0030: over the whole pass)';
