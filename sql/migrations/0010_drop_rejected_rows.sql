-- Superseded by quarantine (one place for everything that did not become an output).
DROP TABLE rejected_rows;
