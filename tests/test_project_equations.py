"""The Accelerometer equations (dpuprof.project.accelerometer) on cases derivable by hand."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpuprof.project.accelerometer import host_time_after, speedup, speedup_fraction

MODES = ("sync", "sync_os", "async")


@pytest.mark.parametrize("mode", MODES)
def test_alpha_zero_gives_no_speedup(mode):
    # nothing offloaded, no offloads: S = 1 / (1 - 0) = 1
    assert speedup_fraction(0.0, 3.0, 0.0, 100, 100, 100, 100, mode) == pytest.approx(1.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.5, 0.9])
def test_infinite_accelerator_without_overhead_is_amdahl(mode, alpha):
    # A -> inf, o0 = L = Q = o1 = 0: S = 1 / (1 - alpha)
    assert speedup_fraction(alpha, math.inf, 0.0, 0, 0, 0, 0, mode) == pytest.approx(1 / (1 - alpha))
    # and a huge finite A converges to it
    assert speedup_fraction(alpha, 1e12, 0.0, 0, 0, 0, 0, "sync") == pytest.approx(1 / (1 - alpha), rel=1e-9)


def test_hand_computed_sync_value():
    # C = 1000 cycles, alpha = 0.5, A = 4, n = 2, o0 = 10, L = 20, Q = 5:
    # S = 1 / (0.5 + 0.125 + 2/1000 * 35) = 1 / 0.695
    assert speedup(1000, 0.5, 4, 2, 10, 20, 5, 0, "sync") == pytest.approx(1 / 0.695)
    # host time after = 1000 * 0.695
    assert host_time_after(1000, 0.5, 4, 2, 10, 20, 5, 0, "sync") == pytest.approx(695.0)
    # sync-OS adds o1 and drops alpha/A: 1 / (0.5 + 2/1000 * (35 + 40))
    assert speedup(1000, 0.5, 4, 2, 10, 20, 5, 40, "sync_os") == pytest.approx(1 / 0.65)
    # async: 1 / (0.5 + 0.07)
    assert speedup(1000, 0.5, 4, 2, 10, 20, 5, 40, "async") == pytest.approx(1 / 0.57)


def test_overhead_can_make_offload_not_pay():
    # alpha = 0.2 offloaded, but 100 offloads of 50 cycles each on a 1000-cycle unit: 0.8 + 5 > 1
    s = speedup(1000, 0.2, math.inf, 100, 30, 20, 0, 0, "async")
    assert s < 1.0
    assert s == pytest.approx(1 / (0.8 + 5.0))
    # A < 1 in sync mode: the host waits longer than it would have worked
    assert speedup(1.0, 0.5, 0.5, 0, 0, 0, 0, 0, "sync") == pytest.approx(1 / 1.5)


def test_vectorised_matches_scalar():
    C = np.array([1.0, 2.0, 3.0])
    alpha = np.array([0.1, 0.5, 0.9])
    A = np.array([np.inf, 2.0, 0.5])
    modes = np.array(["sync", "sync_os", "async"], dtype=object)
    vec = speedup(C, alpha, A, 1.0, 0.01, 0.02, 0.0, 0.05, modes)
    for i in range(3):
        assert vec[i] == pytest.approx(speedup(C[i], alpha[i], A[i], 1.0, 0.01, 0.02, 0.0, 0.05, modes[i]))


def test_unknown_mode_rejected():
    with pytest.raises(ValueError):
        speedup(1.0, 0.5, 2.0, 0, 0, 0, 0, 0, "sometimes")


fractions = st.floats(0.0, 0.99, allow_nan=False)
accel = st.one_of(st.just(math.inf), st.floats(0.05, 1e4, allow_nan=False))
small = st.floats(0.0, 1e-3, allow_nan=False)
counts = st.floats(0.0, 100.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(alpha=fractions, A=accel, n=counts, o0=small, L=small, Q=small, o1=small)
def test_async_at_least_sync(alpha, A, n, o0, L, Q, o1):
    """For the same parameters async never loses to sync (it drops the alpha/A wait)."""
    s_async = speedup_fraction(alpha, A, n, o0, L, Q, o1, "async")
    s_sync = speedup_fraction(alpha, A, n, o0, L, Q, o1, "sync")
    assert s_async >= s_sync * (1 - 1e-12)
    # and sync-OS sits at or below async (it adds the thread switch o1)
    assert speedup_fraction(alpha, A, n, o0, L, Q, o1, "sync_os") <= s_async * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(a1=fractions, a2=fractions, n=counts, o0=small, L=small, Q=small, o1=small,
       mode=st.sampled_from(["async", "sync_os"]))
def test_speedup_monotone_in_alpha_without_waiting(a1, a2, n, o0, L, Q, o1, mode):
    """With a fixed number of offloads, offloading more never hurts when the host does not wait."""
    lo, hi = sorted((a1, a2))
    assert speedup_fraction(hi, 2.0, n, o0, L, Q, o1, mode) >= speedup_fraction(lo, 2.0, n, o0, L, Q, o1, mode) * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(a1=fractions, a2=fractions, A=st.floats(0.05, 1e4), n=counts, o0=small)
def test_sync_monotone_direction_set_by_A(a1, a2, A, n, o0):
    """Sync: more alpha helps iff the accelerator is faster than the host (A >= 1)."""
    lo, hi = sorted((a1, a2))
    s_lo = speedup_fraction(lo, A, n, o0, 0, 0, 0, "sync")
    s_hi = speedup_fraction(hi, A, n, o0, 0, 0, 0, "sync")
    if A >= 1:
        assert s_hi >= s_lo * (1 - 1e-12)
    else:
        assert s_hi <= s_lo * (1 + 1e-12)
