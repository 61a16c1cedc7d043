"""Pre-faulting output arrays (:mod:`hetero_ns3.network.analytic.prefault`) never changes their contents."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hetero_ns3.network.analytic.prefault import populate, populating


def test_populate_keeps_what_is_written_and_reports_the_pages():
    a = np.empty(3 * 2**20)  # 24 MiB, fresh
    a[::1000] = np.arange(a[::1000].size)  # some pages already written
    before = a[::1000].copy()
    done = populate([a])
    np.testing.assert_array_equal(a[::1000], before)
    if sys.platform.startswith("linux"):
        assert done >= a.nbytes - 2 * 4096  # whole pages inside the array (Linux >= 5.14)


@pytest.mark.parametrize("n", [10, 2**21])
def test_populating_while_another_thread_writes(n):
    a = np.empty(n)
    with populating([a, None]):
        a[:] = np.arange(n, dtype=np.float64)  # written during the population
    np.testing.assert_array_equal(a, np.arange(n, dtype=np.float64))
