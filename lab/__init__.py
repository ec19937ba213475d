"""Lab equipment: measurements of the pipeline, not part of the product (not installed, no
tests). Run from the root of a checkout:

    python -m lab.memory_bench   resident memory of one flow run over many small shards
    python -m lab.ingest_bench   DuckDB ingest rows/s against DuckDB's own floor
    python -m lab.propose_speed  drafting cost per request per step, specdec against its peers
    python -m lab.zero_draft_cost  a decode step of a speculative engine drafting nothing, against none
"""
