"""Benchmark commands: they print numbers; tests never time anything."""
