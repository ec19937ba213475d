-- Completions of one shard from the registered Arrow table `staged_results`.
INSERT INTO outputs (run_id, shard_id, id, sample, num_samples, completion, output_token_ids,
                     num_output_tokens, finish_reason)
SELECT ?, ?, id, sample, num_samples, completion, output_token_ids, num_output_tokens, finish_reason
FROM staged_results;
