"""``gc_paused`` (hetero_ns3/workload/gcpause.py) disables the cyclic collector and restores its state."""

from __future__ import annotations

import gc

import pytest

from hetero_ns3.workload.gcpause import gc_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_state_is_restored_after_the_block_and_after_an_error(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled() == enabled
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("inside")
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()
