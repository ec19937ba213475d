-- One shard kind's pilot decision (from the staged run manifest), with each engine's pass.
INSERT INTO pilot_decisions (run_id, kind, ordinal, method, reason, speedup, margin,
                             none_num_requests, none_num_output_tokens, none_engine_s, none_start_s,
                             none_tokens_per_s, none_full_batch_s, none_full_batch_tokens,
                             specdec_num_requests, specdec_num_output_tokens, specdec_engine_s,
                             specdec_start_s, specdec_tokens_per_s, specdec_full_batch_s,
                             specdec_full_batch_tokens)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
