"""The package list in pyproject.toml covers every package folder (sql/ ships as `tasks.sql`).
That the built wheel runs the pipeline away from the checkout: tests/pipeline/test_wheel_install.py."""

from __future__ import annotations

import tomllib

from setuptools import find_packages

from support import REPO


def test_package_list_covers_every_package_folder():
    setuptools_cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools_cfg["packages"])
    on_disk = set(find_packages(str(REPO), include=["specdec", "specdec.*", "flows", "flows.*", "tasks", "tasks.*",
                                                         "bench", "bench.*", "prompt_sets", "prompt_sets.*"]))
    # sql/'s subfolders hold only SQL files, yet setuptools counts them as packages (Python can
    # import a folder without __init__.py) and warns at every build of any left out.
    sql_folders = {f"tasks.sql.{d.name}" for d in (REPO / "sql").iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert listed == on_disk | {"tasks.sql"} | sql_folders, "update [tool.setuptools] packages in pyproject.toml"
    assert setuptools_cfg["package-dir"]["tasks.sql"] == "sql"
    assert {name: ["*.sql"] for name in sql_folders} == setuptools_cfg["package-data"]
