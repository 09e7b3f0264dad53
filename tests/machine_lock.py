"""Two pytest-xdist workers share this machine (pyproject.toml's addopts: ``-n 2``), but a test that
records with eBPF or times a benchmark harness measures CPU time, samples and waits, and another
test's load beside it skews those. So a test file with a ``root`` or ``benchmark`` test runs alone,
from its first test's set-up to its last one's teardown (module fixtures included); the other files
run two at a time.

The lock is a readers-writer lock of two flock(2) files in a folder of the run's own (made by the
controller, which the workers inherit through ``PYTEST_MACHINE_LOCK_DIR``): a file that runs alone holds
``machine.lock`` exclusively, any other test holds it shared. Both pass through ``turnstile.lock``
first, and a file that waits to run alone keeps the turnstile until it runs: no new shared holder
starts meanwhile, so it never waits on more than the test already running beside it.
"""

from __future__ import annotations

import fcntl
import os


class MachineLock:
    """One worker's hold on the machine: ``acquire(alone)`` blocks until this worker may run its next
    test (alone: no other test runs; not alone: only tests that are not alone run beside it)."""

    def __init__(self, folder: str):
        self._main = os.open(os.path.join(folder, "machine.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._gate = os.open(os.path.join(folder, "turnstile.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.held = False

    def acquire(self, alone: bool) -> None:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            if alone:
                fcntl.flock(self._main, fcntl.LOCK_EX)  # waits for the test running beside it
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        if not alone:
            fcntl.flock(self._main, fcntl.LOCK_SH)
        self.held = True

    def release(self) -> None:
        fcntl.flock(self._main, fcntl.LOCK_UN)
        self.held = False
