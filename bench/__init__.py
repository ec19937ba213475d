"""The bench: `specdec bench` and `specdec bench-run` (bench/commands.py); the core never imports it."""
