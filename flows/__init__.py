"""The pipeline's flows and what joins them to the `specdec` command.

    generation.py        flow `speculative-generation`: one process, shards -> DuckDB
    fanout.py            flows for one run over a work pool: the parent and its shard groups
    shard_run.py         one run's shard work, shared by both: read -> generate -> stage
    params.py            FlowParams: the flow's parameters (the generation parameters and where)
    signature.py         a flow's signature derived from a parameter model
    commands.py          `specdec run|report|sql|store-bench` (entry-point group specdec.commands)
    reference.py         docs/reference.md, generated from the code (make docs)
    reference_schema.py  its database part: tables, views and migrations from sql/
"""
