"""SQL files of the pipeline, installed as the package `tasks.sql` (see pyproject.toml).

This file only makes the folder a regular package, so that `importlib.resources` finds it
the same way in an editable install and in a wheel. Nothing imports it for code.
"""
