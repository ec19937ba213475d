-- Completions of one shard from the registered Arrow table `staged_results`.
INSERT INTO outputs (run_id, shard_id, id, completion, output_token_ids, num_output_tokens, finish_reason)
SELECT ?, ?, id, completion, output_token_ids, num_output_tokens, finish_reason
FROM staged_results;
