"""The workload and system layers. The Rust crate in this folder (`tracefabric-collectives`)
walks per-rank ET graphs and turns collectives into flow DAGs (ring, direct, recursive
doubling, halving-doubling, double binary tree, hierarchical per network dimension);
`workload.py` reads Chakra ETs for it, and `iteration.py` runs a workload through it on a
network backend (`tracefabric.collectives.iteration.simulate`)."""

from typing import Any

from .. import _core
from ..astra_configs.formats import check_direct_window
from ..errors import from_system


def collective_flows(algorithm: str, kind: str, ranks: int, size: int, exact_blocks: bool = True) -> list[dict[str, Any]]:
    """The flows one collective of `size` bytes over `ranks` ranks becomes under `algorithm`
    (either name: `double_binary_tree` or ASTRA-sim's `doubleBinaryTree`): per transfer its
    src, dst, bytes, whether it reduces on arrival and the transfers it waits for ("after").
    Bad input raises ConfigError naming the argument."""
    if isinstance(ranks, int):
        check_direct_window(algorithm, ranks, "algorithm", "algorithm")
    try:
        flows = _core.collective_flows(algorithm, kind, ranks, size, exact_blocks)
    except _core.SystemLayerError as e:
        raise from_system(e) from None
    return [dict(zip(("src", "dst", "bytes", "reduce", "after"), f)) for f in flows]
