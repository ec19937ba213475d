"""The pipeline's Prefect tasks and the I/O they wrap. Only `prefect_*` modules need Prefect;
the others are plain functions (the tests and `specdec report` call them directly).

    prefect_tasks.py      the @task wrappers the flows call: retries, logging, run names
    prefect_artifacts.py  what a finished run shows in the Prefect UI (tables, summary)
    credentials.py        the S3 credentials block (a Prefect block: never a flow parameter)
    storage.py            local folders and S3 prefixes behind one pyarrow filesystem
    prompt_shards.py      list the prompt shards of a source; read, fingerprint, validate one
    staging.py            per-shard results and manifests, committed atomically
    ingest.py             staging -> DuckDB: the only writer
    db.py                 DuckDB connections, the SQL files (sql/, shipped as tasks.sql), migrations
    report.py             `specdec report` / `specdec sql`: read-only text tables
    bench_store.py        `specdec store-bench`: bench records into DuckDB
"""
