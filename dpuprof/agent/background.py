"""The agent's one background thread for work on completed recording files.

At each rotation ``RotationWorker.submit(path)`` hands the completed file to one thread, so the
recorder's drains are never delayed: the thread loads the file once and gives the loaded
Recording to each task in turn (``--push``: push.py, then ``--project``: projecting.py). A file
that comes while the previous one is still being worked on is skipped (every task is told, with
the reason ``busy``); one that cannot be loaded, or that a task fails on, with ``error``.

A task is a ``Task`` (the Protocol below: push.Pusher, projecting.Projector); tests/test_contracts.py
checks that each has its members with compatible signatures.
"""

from __future__ import annotations

import queue
import threading
import traceback
from pathlib import Path
from typing import Protocol

from dpuprof.errors import UserError
from dpuprof.recording import Recording, load

#: What a task may raise on a file it cannot handle (a damaged or unexpected recording); anything
#: else is a bug: its traceback goes to stderr, the file is skipped (``error``) and the thread goes on.
TASK_ERRORS = (UserError, OSError, ValueError, KeyError)


class Task(Protocol):
    """What RotationWorker does with each file: ``consume(rec)`` works on the loaded Recording, in
    the worker's thread (files that come meanwhile are skipped); ``skip(path, reason, why)`` is told
    of a file it will not see, ``reason`` ``busy`` (the previous file was still being worked on:
    called from the thread that submitted it, the recorder's, so it must be quick) or ``error``
    (not loadable, or ``consume`` raised one of TASK_ERRORS; ``why`` says what)."""

    def consume(self, rec: Recording) -> None: ...
    def skip(self, path: Path, reason: str, why: str = "") -> None: ...


class RotationWorker:
    """Runs ``tasks`` on each submitted file in one daemon thread, the newest file only: the queue
    holds one, so a slow task can never make the agent's memory grow."""

    def __init__(self, tasks: list[Task]):
        self.tasks = list(tasks)
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._work, name="dpuprof-rotation", daemon=True)
        self._thread.start()

    def submit(self, path, _pids=None) -> None:
        """Work on ``path`` (RotatingWriter.on_rotate's signature), or tell every task it was
        skipped (``busy``) when the previous file is still being worked on."""
        try:
            self._queue.put_nowait(Path(path))
        except queue.Full:
            for task in self.tasks:
                task.skip(Path(path), "busy", "the previous file was still being worked on")

    def _work(self) -> None:
        while True:
            path = self._queue.get()
            if path is None:
                return
            try:
                rec = load(path)
            except TASK_ERRORS as err:
                for task in self.tasks:
                    task.skip(path, "error", str(err))
                continue
            for task in self.tasks:
                try:
                    task.consume(rec)
                except TASK_ERRORS as err:  # one task's failure does not keep the file from the others
                    task.skip(path, "error", str(err))
                except Exception as err:  # noqa: BLE001 -- a bug: its traceback once, and the agent goes on
                    # An agent runs for weeks: a bug on one file's shape must not end --push and
                    # --project for good (the thread died, and every later file was "busy").
                    traceback.print_exc()
                    task.skip(path, "error", f"{type(err).__name__}: {err}")

    def close(self, timeout: float = 30.0) -> None:
        """Let the file being worked on finish (at most ``timeout`` seconds), then stop."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)
