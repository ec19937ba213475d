-- The request_stats table as it was before 0018, now copied.
DROP TABLE request_stats_before_samples;
