"""Built-in collective algorithms, one module each; importing this package registers them."""

from hetero_ns3.collectives.algorithms import (
    alltoall,
    expert_dispatch,
    hierarchical,
    nvls,
    nvls_tree,
    p2p,
    pxn,
    ring,
    tree,
)

__all__ = ["alltoall", "expert_dispatch", "hierarchical", "nvls", "nvls_tree", "p2p", "pxn", "ring", "tree"]
