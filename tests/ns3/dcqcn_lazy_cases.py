"""Flow sets and the paired-run helper shared by the lazy-DCQCN-timer tests (``test_dcqcn_lazy_*.py``).

Each lazy mode (``cc.lazy_alpha``, ``cc.lazy_decrease``) must give the eager timers' results with fewer events;
both tests run the same flows twice on a 100 Gb/s star, eager then lazy, and compare every table exactly.
"""

from __future__ import annotations

import pandas as pd

from hetero_ns3.network.config import CcConfig, NetworkConfig
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology


def incast(n: int, size: int) -> pd.DataFrame:
    """``n`` flows of ``size`` bytes from ``h1..hn`` to ``h0``, all at t = 0."""
    return pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [size] * n, "start_s": [0.0] * n}
    )


def rejoin() -> pd.DataFrame:
    """A 100 MB flow cut by a 2 MB one at t = 0, back at line rate when a second 2 MB one joins at 7 ms."""
    return pd.DataFrame(
        {
            "src": ["h1", "h2", "h3"],
            "dst": ["h0"] * 3,
            "size_bytes": [100_000_000, 2_000_000, 2_000_000],
            "start_s": [0.0, 0.0, 7e-3],
        }
    )


def eager_and_lazy(flag: str, preset: str, delay_s: float, flows: pd.DataFrame, **kw) -> list:
    """Run ``flows`` with DCQCN ``preset`` and ``CcConfig.<flag>`` False then True; both runs must complete.

    ``delay_s`` is every link's propagation delay; ``kw`` goes to ``simulate_flows``. The port towards ``h0`` is
    sampled, so ``res.queues`` can be compared too.
    """
    graph = resolve_topology(f"star:{len(flows) + 1}", 100e9, delay_s)
    port = egress_port(graph, "sw0", "h0")
    out = []
    for lazy in (False, True):
        cfg = NetworkConfig(cc=CcConfig(kind="dcqcn", preset=preset, **{flag: lazy}))
        res = simulate_flows(graph, flows, cfg, sample_ports=[port], **kw)
        assert res.completed == len(flows)
        out.append(res)
    return out


def assert_same_tables(eager, lazy) -> None:
    """Flows, port counters and queue samples identical to the last digit; both runs profiled."""
    pd.testing.assert_frame_equal(lazy.flows, eager.flows, check_exact=True)
    pd.testing.assert_frame_equal(lazy.ports, eager.ports, check_exact=True)
    pd.testing.assert_frame_equal(lazy.queues, eager.queues, check_exact=True)
    assert eager.profile is not None and lazy.profile is not None
