-- The outputs table as it was before 0014, now copied.
DROP TABLE outputs_before_samples;
