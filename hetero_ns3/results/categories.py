"""How task categories map onto breakdown classes.

Planners tag every task with a free-form category string (``ExecutionPlan.categories``). The
results layer needs only four classes:

=========  ==============================================  ==========================================
class      categories                                      meaning
=========  ==============================================  ==========================================
compute    compute, fwd, bwd, forward, backward, opt,      model kernels: their busy time is
           optimizer, recompute                            ``compute_s``
sync       sync                                            zero-time barriers; they only pass waiting on
comm       tp, pp, dp, ep, cp, comm                        communication by parallel dimension; flows
                                                           and the reduction kernels of collectives
other      host, offload, anything else                    counted in ``other_s`` (``host``: the host
                                                           thread issuing kernels, workload/host.py;
                                                           ``offload``: copies to and from host memory,
                                                           workload/offload.py)
=========  ==============================================  ==========================================

A flow task is always communication whatever its category. The documented table lives in
``docs/results.md``; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

COMPUTE_CLASS = 0
SYNC_CLASS = 1
COMM_CLASS = 2
OTHER_CLASS = 3

CLASS_NAMES = ("compute", "sync", "comm", "other")

#: Category name -> breakdown class name. Unknown categories are "other".
CATEGORY_CLASSES: dict[str, str] = {
    "compute": "compute",
    "fwd": "compute",
    "bwd": "compute",
    "forward": "compute",
    "backward": "compute",
    "opt": "compute",
    "optimizer": "compute",
    "recompute": "compute",
    "sync": "sync",
    "tp": "comm",
    "pp": "comm",
    "dp": "comm",
    "ep": "comm",
    "cp": "comm",
    "comm": "comm",
    "host": "other",
    "offload": "other",
}

#: The communication category whose waits are pipeline bubble (other comm categories are collectives).
PIPELINE_CATEGORY = "pp"


def category_class(category: str) -> str:
    """The breakdown class (``compute``, ``sync``, ``comm``, ``other``) of a category name."""
    return CATEGORY_CLASSES.get(category.strip().lower(), "other")


def class_codes(categories: Sequence[str]) -> np.ndarray:
    """int8 class code (``COMPUTE_CLASS``...) for each entry of ``ExecutionPlan.categories``."""
    codes = [CLASS_NAMES.index(category_class(c)) for c in categories]
    return np.asarray(codes, dtype=np.int8)
