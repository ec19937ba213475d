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
                                                         "bench", "bench.*"]))
    assert listed == on_disk | {"tasks.sql"}, "update [tool.setuptools] packages in pyproject.toml"
    assert setuptools_cfg["package-dir"]["tasks.sql"] == "sql"
