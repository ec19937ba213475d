-- The demo's table for method auto: per shard kind of the runs whose id starts with $1, what
-- the pilot measured (specdec's speed-up over none, each engine's output tokens per second
-- on what the decision compared, the sample's requests), the engine the kind then ran on and its output
-- tokens per engine-second over all its shards.
SELECT CASE WHEN kind = '' THEN '(top level)' ELSE kind END AS shard_kind,
       pilot_requests,
       pilot_basis,
       pilot_none_tokens_per_s,
       pilot_specdec_tokens_per_s,
       speedup AS pilot_speedup,
       method AS ran,
       num_prompts AS prompts,
       tokens_per_engine_s
FROM v_pilot_decisions
WHERE starts_with(run_id, $1)
ORDER BY run_id, ordinal;
