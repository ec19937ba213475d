-- Seconds the run's engines held requests (the sum of their steps' wall times), next to
-- wall_s. NULL: not measured (runs before this column, workers that do not attribute).
ALTER TABLE runs ADD COLUMN engine_busy_s DOUBLE;
