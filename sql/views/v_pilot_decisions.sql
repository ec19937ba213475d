-- Method auto, per run and shard kind: the engine the kind ran on and why (the pilot's
-- speed-up of specdec over none, and each engine's output tokens per second on its share of the
-- pilot sample, on what the decision compared: pilot_basis, 'full-batch steps' or 'whole
-- shares'), then what the kind's shards did on it. Kinds too small for a pilot show with speedup
-- and pilot figures NULL; tokens_per_engine_s is NULL unless every shard of the kind has engine
-- time attributed.
CREATE OR REPLACE VIEW v_pilot_decisions AS
WITH per_kind AS (
    SELECT
        run_id,
        kind,
        count(*) FILTER (WHERE status = 'ingested') AS shards_done,
        count(*) FILTER (WHERE status = 'failed') AS shards_failed,
        sum(num_prompts) AS num_prompts,
        sum(num_output_tokens) AS num_output_tokens,
        CASE WHEN count(engine_s) = count(*) THEN sum(engine_s) END AS engine_s
    FROM shards
    WHERE kind IS NOT NULL
    GROUP BY run_id, kind
),
decisions AS (  -- what the decision compared, as specdec.pilot.basis (NULL: no pilot ran)
    SELECT
        *,
        CASE WHEN none_num_requests IS NULL OR specdec_num_requests IS NULL THEN NULL
             WHEN none_full_batch_s > 0 AND specdec_full_batch_s > 0 THEN 'full-batch steps'
             ELSE 'whole shares' END AS basis
    FROM pilot_decisions
)
SELECT
    d.run_id,
    r.run_name,
    d.kind,
    d.ordinal,
    d.method,
    d.reason,
    d.speedup,
    d.margin,
    d.none_num_requests + d.specdec_num_requests AS pilot_requests,  -- split between the engines
    d.basis AS pilot_basis,
    CASE WHEN d.basis = 'full-batch steps' THEN d.none_full_batch_tokens / nullif(d.none_full_batch_s, 0)
         ELSE d.none_tokens_per_s END AS pilot_none_tokens_per_s,
    CASE WHEN d.basis = 'full-batch steps' THEN d.specdec_full_batch_tokens / nullif(d.specdec_full_batch_s, 0)
         ELSE d.specdec_tokens_per_s END AS pilot_specdec_tokens_per_s,
    coalesce(k.shards_done, 0) AS shards_done,
    coalesce(k.shards_failed, 0) AS shards_failed,
    coalesce(k.num_prompts, 0) AS num_prompts,
    coalesce(k.num_output_tokens, 0) AS num_output_tokens,
    k.engine_s,
    k.num_output_tokens / nullif(k.engine_s, 0) AS tokens_per_engine_s
FROM decisions AS d
LEFT JOIN runs AS r USING (run_id)
LEFT JOIN per_kind AS k USING (run_id, kind);
