"""What this machine has, for plans checked before they start (a synthesis, a capture's ranks):
free memory, and the share of it a plan may take."""

from __future__ import annotations

# Share of the free memory a synthesis, or a capture's ranks, may take.
MEMORY_SHARE = 0.8


def available_memory() -> int:
    """Bytes of memory this machine has free."""
    import psutil

    return int(psutil.virtual_memory().available)


def memory_budget() -> int:
    """Bytes a synthesis may hold: most of the memory this machine has free."""
    return int(available_memory() * MEMORY_SHARE)
