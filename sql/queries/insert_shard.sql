-- One shard's status, fingerprint and timings.
INSERT INTO shards (run_id, shard_id, source_path, fingerprint, config_hash, status, error,
                    num_prompts, num_rejected, num_output_tokens, num_steps, num_drafts,
                    num_draft_tokens, num_accepted_tokens, read_s, engine_start_s, generate_s,
                    stage_s, ingest_s, generated_at, ingested_at, num_input_rows, worker, engine_s, engine,
                    method, kind)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?, ?, ?, ?, ?, ?);
