-- What the migration runner applied: one row per migration or view file, with its checksum.
CREATE TABLE IF NOT EXISTS schema_migrations (
    name VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,          -- 'migration' (applied once) or 'view' (re-applied on change)
    checksum VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
