"""Loads specdec's compiled core (`specdec_native`, built from packaging/specdec_native)."""

from __future__ import annotations

from types import ModuleType

ABI_VERSION = 7  # the specdec_native.ABI_VERSION this code was written against
INSTALL_HINT = "build it with `make setup` (scripts/install.sh installs packaging/specdec_native)"


class NativeDrafterMissing(RuntimeError):
    """specdec's compiled core is not installed (or is a build of another version)."""


def load_core() -> ModuleType:
    """The compiled module, or NativeDrafterMissing saying how to get it."""
    try:
        import specdec_native
    except ImportError as exc:
        raise NativeDrafterMissing(f"specdec's compiled drafter (specdec_native) is not installed: {INSTALL_HINT}") from exc
    found = getattr(specdec_native, "ABI_VERSION", None)
    if found != ABI_VERSION:
        raise NativeDrafterMissing(f"specdec_native {found if found is not None else '?'} is installed, this specdec "
                                   f"needs version {ABI_VERSION}: {INSTALL_HINT}")
    return specdec_native


def draft_sources() -> tuple[str, ...]:
    """Where a drafted token can come from, in the compiled core's counter order; none without
    the core (it alone drafts from them)."""
    try:
        return tuple(load_core().DRAFT_SOURCES)
    except NativeDrafterMissing:
        return ()
