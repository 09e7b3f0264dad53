"""The Accelerometer equations (Sriraman and Dhanotia, ASPLOS 2020).

Reference implementation: https://github.com/akshithasriraman/Accelerometer, ``accelerometer.cc``
(functions ``Sync``, ``SyncOS`` and ``Async``). For one unit of work of ``C`` host cycles (any time
unit, as long as ``o0``, ``L``, ``Q`` and ``o1`` use the same one), of which a fraction ``alpha``
is offloaded in ``n`` offloads to an accelerator ``A`` times faster than the host:

    sync:     S = 1 / ((1 - alpha) + alpha / A + n / C * (o0 + L + Q))
    sync_os:  S = 1 / ((1 - alpha) + n / C * (o0 + L + Q + o1))
    async:    S = 1 / ((1 - alpha) + n / C * (o0 + L + Q))

``host_time_after`` is the denominator times ``C``: the host time the same work still costs after
the offload. ``S < 1`` means the per-offload overhead costs more than the offload removes: the
offload does not pay. ``A = inf`` is allowed (``alpha / A = 0``). Works on floats and, element-wise,
on pandas Series / numpy arrays.
"""

from __future__ import annotations

import numpy as np

MODES = ("sync", "sync_os", "async")


def _check_mode(mode) -> None:
    modes = np.atleast_1d(np.asarray(mode, dtype=object))
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown mode {bad[0]!r} (use {', '.join(MODES)})")


def host_time_after(C, alpha, A, n, o0, L, Q, o1, mode):
    """Host time of the unit of work after offload (same unit as ``C``).

    ``mode`` may be a string or an array of strings (one per element).
    """
    _check_mode(mode)
    C, alpha, A, n = (np.asarray(x, dtype=float) for x in (C, alpha, A, n))
    o0, L, Q, o1 = (np.asarray(x, dtype=float) for x in (o0, L, Q, o1))
    mode = np.asarray(mode, dtype=object)
    kept = C * (1.0 - alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        on_accel = np.where(np.isinf(A), 0.0, C * alpha / A)
    per_offload = n * (o0 + L + Q)
    sync = kept + on_accel + per_offload
    sync_os = kept + n * (o0 + L + Q + o1)
    asyn = kept + per_offload
    out = np.where(mode == "sync", sync, np.where(mode == "sync_os", sync_os, asyn))
    return float(out) if out.ndim == 0 else out


def speedup(C, alpha, A, n, o0, L, Q, o1, mode):
    """Accelerometer speed-up ``S = C / host_time_after`` (1.0 where ``C`` is 0)."""
    after = np.asarray(host_time_after(C, alpha, A, n, o0, L, Q, o1, mode), dtype=float)
    C = np.asarray(C, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(C > 0, np.where(after > 0, C / np.where(after > 0, after, 1.0), np.inf), 1.0)
    return float(s) if s.ndim == 0 else s


def speedup_fraction(alpha, A, n_over_C, o0, L, Q, o1, mode):
    """The equations exactly as written: ``n_over_C`` is offloads per unit of host time."""
    return speedup(1.0, alpha, A, n_over_C, o0, L, Q, o1, mode)
