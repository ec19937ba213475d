"""The bench: `specdec bench` and `specdec bench-run`, joined to the `specdec` command through
the entry-point group `specdec.commands` (bench/commands.py); the core never imports it."""
