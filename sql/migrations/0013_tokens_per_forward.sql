-- Output tokens per target forward is called tokens_per_forward everywhere (results Parquet,
-- views, bench, report); request_stats still had the old name from 0004. Rows are kept.
ALTER TABLE request_stats RENAME COLUMN mean_accepted_length TO tokens_per_forward;
