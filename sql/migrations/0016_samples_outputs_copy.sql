-- Outputs written before samples existed: each is sample 0 of 1.
INSERT INTO outputs (run_id, shard_id, id, sample, num_samples, completion, output_token_ids,
                     num_output_tokens, finish_reason)
SELECT run_id, shard_id, id, 0, 1, completion, output_token_ids, num_output_tokens, finish_reason
FROM outputs_before_samples;
