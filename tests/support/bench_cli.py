"""`specdec` with the bench's commands, for tests that run `specdec bench ...`: where the
installed metadata predates the bench's entry point (an editable install made before it
existed), the bench's provider is added to the ones the group lists."""

from __future__ import annotations

from collections.abc import Callable

import bench.commands
from specdec import cli


def specdec_main(monkeypatch) -> Callable[[list[str]], int]:
    providers = cli.extensions()
    if bench.commands not in providers:
        monkeypatch.setattr(cli, "extensions", lambda: [*providers, bench.commands])
    return cli.main
