"""Named parameter sets of the congestion controls (``[network.cc] preset = ...``).

A preset gives every field of :class:`~hetero_ns3.network.config.DcqcnConfig` (plus the receiver's
CNP interval, ``nic.cnp_interval_s``) or of :class:`~hetero_ns3.network.config.HpccConfig`; a field
set explicitly in the scenario overrides its preset value. Sources are cited per preset and in
``docs/roce.md`` ("Presets"); constants not in the public calibration notes
(``shared/reference/calibration/README.md``) are marked there.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

DCQCN_PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Zhu et al., SIGCOMM'15, as carried by the author's ns-3 code (bobzhuyb/ns3-rdma@e8a27d0) and htsim:
        # the paper's pseudocode resets Rt = Rc on every cut (clamp on). R_HAI 200 Mb/s: the author's shipped
        # windows/ns-3-dev/x64/Release/mix/config.txt (RATE_HAI; it also has CLAMP_TARGET_RATE 1); min rate
        # 100 Mb/s: the MinRate default of its qbb-net-device.cc. The RP-side decrease interval is not in it
        # (it cuts on every CNP, the NP sending at most one per 50 us): ours, 4 us, which never binds here.
        "paper": MappingProxyType(
            {
                "g": 1.0 / 256,
                "alpha_update_interval_s": 55e-6,
                "rate_increase_interval_s": 55e-6,
                "byte_counter_bytes": 10_000_000,
                "fast_recovery_steps": 5,
                "rate_ai_bps": 40e6,
                "rate_hai_bps": 200e6,
                "increase_reference_rate_bps": 0.0,
                "min_rate_bps": 100e6,
                "rate_decrease_interval_s": 4e-6,
                "clamp_target_rate": True,
                "decrease_on_period": False,
                "cnp_interval_s": 50e-6,
            }
        ),
        # HPCC ns-3 artifact (alibaba-edu/High-Precision-Congestion-Control@9f4be2a, simulation/run.py --cc dcqcn
        # and mix/config.txt; SimAI inherits it): Mellanox-like, increase steps 5 / 50 Mb/s per 25 Gb/s of line
        # rate, no byte counter, CNP for every ECN-marked packet, EWMA_GAIN 1/256, cuts at the periodic
        # CheckRateDecreaseMlx (rdma-hw.cc).
        "hpcc-artifact": MappingProxyType(
            {
                "g": 1.0 / 256,
                "alpha_update_interval_s": 1e-6,
                "rate_increase_interval_s": 300e-6,
                "byte_counter_bytes": 0,
                "fast_recovery_steps": 1,
                "rate_ai_bps": 5e6,
                "rate_hai_bps": 50e6,
                "increase_reference_rate_bps": 25e9,
                "min_rate_bps": 1e9,
                "rate_decrease_interval_s": 4e-6,
                "clamp_target_rate": False,
                "decrease_on_period": True,
                "cnp_interval_s": 0.0,
            }
        ),
        # NVIDIA ConnectX firmware defaults, checked against a public `mlxconfig -q` dump of a ConnectX card:
        # DCE_TCP_G 1019 and DCE_TCP_RTT 1 (alpha += (1 - 1019/1024) per 1 us period with a CNP: the calibration
        # notes' reading), RATE_REDUCE_MONITOR_PERIOD 4 with RATE_TO_SET_ON_FIRST_CNP 0 (cuts on a 4 us grid, the
        # first CNP cuts nothing), RPG_MIN_RATE 1 Mb/s, RPG_TIME_RESET 300 us, RPG_BYTE_RESET 32767 B,
        # RPG_THRESHOLD 1, RPG_AI_RATE 5 / RPG_HAI_RATE 50 Mb/s, CLAMP_TGT_RATE 0 (CLAMP_TGT_RATE_AFTER_TIME_INC 1),
        # INITIAL_ALPHA_VALUE 1023. Receiver: MIN_TIME_BETWEEN_CNPS 4 us (modelled per QP; see docs/roce.md).
        "connectx": MappingProxyType(
            {
                "g": 5.0 / 1024,
                "alpha_update_interval_s": 1e-6,
                "rate_increase_interval_s": 300e-6,
                "byte_counter_bytes": 32767,
                "fast_recovery_steps": 1,
                "rate_ai_bps": 5e6,
                "rate_hai_bps": 50e6,
                "increase_reference_rate_bps": 0.0,
                "min_rate_bps": 1e6,
                "rate_decrease_interval_s": 4e-6,
                "clamp_target_rate": False,
                "decrease_on_period": True,
                "cnp_interval_s": 4e-6,
            }
        ),
    }
)
"""DCQCN presets: every DcqcnConfig field plus ``cnp_interval_s`` (the receiver's ``nic.cnp_interval_s``)."""

DEFAULT_DCQCN_PRESET = "hpcc-artifact"
"""Preset used when ``cc.preset`` is not set (see docs/roce.md for why)."""

HPCC_PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Li et al., SIGCOMM'19: eta 0.95, maxStage 5; W_AI as a rate 50 Mb/s (our earlier default). T is one
        # network-wide value, the largest base RTT (paper section 5 parameters; artifact
        # alibaba-edu/High-Precision-Congestion-Control simulation/scratch/third.cc maxRtt with GLOBAL_T 1).
        "paper": MappingProxyType(
            {"eta": 0.95, "max_stage": 5, "rate_ai_bps": 50e6, "min_rate_bps": 100e6, "base_rtt": "global"}
        ),
        # The HPCC authors' later recommendation (calibration notes): eta 0.99 with maxStage 0; global T as above.
        "recommended": MappingProxyType(
            {"eta": 0.99, "max_stage": 0, "rate_ai_bps": 50e6, "min_rate_bps": 100e6, "base_rtt": "global"}
        ),
        # HPCC ns-3 artifact as its authors run it (alibaba-edu/High-Precision-Congestion-Control@9f4be2a,
        # simulation/run.py --cc hp --bw 100): U_TARGET 0.95, MI_THRESH 0 (its --mi default; the sample
        # mix/config.txt also has 0), RATE_AI 10 x bw/25 = 40 Mb/s at 100 Gb/s (fixed here, not scaled with the
        # line rate), MIN_RATE 1 Gb/s, GLOBAL_T 1. Matches the reference build's 8:1 incast within 0.003
        # (docs/roce.md, "Reference implementation: HPCC and PFC").
        "hpcc-artifact": MappingProxyType(
            {"eta": 0.95, "max_stage": 0, "rate_ai_bps": 40e6, "min_rate_bps": 1e9, "base_rtt": "global"}
        ),
    }
)
"""HPCC presets: every HpccConfig field."""

DEFAULT_HPCC_PRESET = "paper"
"""HPCC preset used when ``cc.preset`` is not set."""

_TIMELY_PAPER: Mapping[str, Any] = MappingProxyType(
    {
        "alpha": 0.875,
        "beta": 0.8,
        "t_low_s": 50e-6,
        "t_high_s": 500e-6,
        "min_rtt_s": 20e-6,
        "rate_ai_bps": 10e6,
        "hai_count": 5,
        "hai_factor": 5,
        "min_rate_bps": 100e6,
    }
)

TIMELY_PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Mittal et al., SIGCOMM'15 (Algorithm 1 and its parameter table): EWMA alpha 0.875, beta 0.8,
        # T_low 50 us, T_high 500 us, minRTT 20 us, delta 10 Mb/s, HAI after 5 completions with N = 5. The
        # paper gives no rate floor: ours 100 Mb/s (as DCTCP's and HPCC's).
        "paper": _TIMELY_PAPER,
        # HPCC ns-3 artifact (alibaba-edu/High-Precision-Congestion-Control@9f4be2a, rdma-hw.cc TimelyAlpha /
        # TimelyBeta / TimelyTLow / TimelyTHigh / TimelyMinRtt and simulation/run.py): the same five constants,
        # additive step line rate / 1000 (100 Mb/s at the 100 Gb/s this preset assumes; HAI 5x) and
        # MIN_RATE 1 Gb/s. (The artifact also updates once per RTT rather than per ACK: not modelled.)
        "hpcc-artifact": MappingProxyType({**_TIMELY_PAPER, "rate_ai_bps": 100e6, "min_rate_bps": 1e9}),
    }
)
"""TIMELY presets: every TimelyConfig field."""

DEFAULT_TIMELY_PRESET = "hpcc-artifact"
"""TIMELY preset used when ``cc.preset`` is not set."""

PRESETS: Mapping[str, Mapping[str, Mapping[str, Any]]] = MappingProxyType(
    {"dcqcn": DCQCN_PRESETS, "hpcc": HPCC_PRESETS, "timely": TIMELY_PRESETS}
)
"""Presets by congestion-control kind."""

DEFAULT_PRESETS: Mapping[str, str] = MappingProxyType(
    {"dcqcn": DEFAULT_DCQCN_PRESET, "hpcc": DEFAULT_HPCC_PRESET, "timely": DEFAULT_TIMELY_PRESET}
)
"""Default preset by kind."""
