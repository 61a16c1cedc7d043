"""Max-min fair rates against textbook answers (Bertsekas & Gallager, Data Networks, 6.5.2)."""

import numpy as np
import pytest

from hetero_ns3.network.analytic import maxmin_rates

INF = np.inf


def test_single_bottleneck_equal_shares():
    cap = np.array([10.0, 4.0, INF])
    res = np.array([[0, 1], [1, 2], [1, 2], [1, 2]])
    rate, rounds = maxmin_rates(res, cap)
    np.testing.assert_allclose(rate, [1.0, 1.0, 1.0, 1.0], rtol=1e-15)
    assert rounds == 1


def test_line_network_long_flow_and_one_hop_flows():
    # A-B (cap 1) - C (cap 2): long flow A->C, one flow on A-B, two flows on B-C.
    cap = np.array([1.0, 2.0, INF])
    res = np.array([[0, 1], [0, 2], [1, 2], [1, 2]])
    rate, rounds = maxmin_rates(res, cap)
    # A-B saturates first at 1/2; B-C then has 1.5 left for its two one-hop flows.
    np.testing.assert_allclose(rate, [0.5, 0.5, 0.75, 0.75], rtol=1e-15)
    assert rounds == 2


def test_classic_three_flow_line_gives_half_each():
    cap = np.array([1.0, 1.0, INF])
    rate, _ = maxmin_rates(np.array([[0, 1], [0, 2], [1, 2]]), cap)
    np.testing.assert_allclose(rate, [0.5, 0.5, 0.5], rtol=1e-15)


def test_allocation_is_feasible_and_every_flow_has_a_saturated_bottleneck():
    rng = np.random.default_rng(3)
    n_res, pad = 30, 30
    cap = np.append(rng.uniform(1, 10, n_res), INF)
    res = np.full((200, 4), pad)
    for i in range(200):
        k = rng.integers(1, 5)
        res[i, :k] = rng.choice(n_res, size=k, replace=False)
    rate, _ = maxmin_rates(res, cap)
    load = np.bincount(res.ravel(), weights=np.repeat(rate, 4), minlength=n_res + 1)[:n_res]
    assert np.all(load <= cap[:n_res] * (1 + 1e-9))
    # Max-min optimality: each flow crosses a saturated link on which no flow has a higher rate.
    for i in range(200):
        ok = False
        for r in res[i]:
            if r == pad or load[r] < cap[r] * (1 - 1e-9):
                continue
            on_r = np.any(res == r, axis=1)
            if rate[i] >= rate[on_r].max() * (1 - 1e-9):
                ok = True
        assert ok, f"flow {i} has no bottleneck"


def test_empty_input():
    rate, rounds = maxmin_rates(np.zeros((0, 2), np.int64), np.array([1.0, INF]))
    assert rate.shape == (0,) and rounds == 0


def test_flow_on_infinite_resources_only_is_an_error():
    with pytest.raises(ValueError, match="infinite"):
        maxmin_rates(np.array([[1]]), np.array([1.0, INF]))
