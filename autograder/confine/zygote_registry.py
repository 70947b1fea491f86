"""This process's kernel zygote: one :class:`ZygoteRegistry`, shared by every grading run in the process.

The warm zygote is what makes forking kernels pay, so a grading process keeps one (started on its first forked
kernel) for as long as it fits: same compilation cache, unchanged course code (:func:`zygote.code_fingerprint`),
still alive. A zygote that fails to start only defers the next try (:class:`StartFailures`): kernels are launched
one by one meanwhile.
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.confine import fork_server, zygote

#: seconds before the first retry of a zygote that failed to start; each further failure doubles it
RETRY_AFTER_S = 30.0
#: the longest wait between two tries
MAX_RETRY_AFTER_S = 1800.0


@dataclass
class StartFailures:
    """Failed zygote starts in a row, and when a new try is due (exponential backoff).

    A zygote that cannot start costs each kernel up to a start timeout, so the next kernels are launched
    one by one instead; but a long-lived grader (formgrader's server) must not give up forking for good
    after one bad moment (a loaded machine, a full disk): it tries again once the backoff has passed.
    """

    count: int = 0
    last: float = 0.0
    reason: str = ""

    def due(self, now: float) -> bool:
        return self.count == 0 or now - self.last >= min(MAX_RETRY_AFTER_S, RETRY_AFTER_S * 2 ** (self.count - 1))

    def failed(self, reason: str, now: float) -> None:
        self.count, self.last, self.reason = self.count + 1, now, reason


class ZygoteRegistry:
    """The zygote a process forks its kernels from. ``start`` makes a new one for a compilation cache
    (:class:`zygote.Zygote`); ``fingerprint`` is the course code it must match (:func:`zygote.code_fingerprint`)."""

    def __init__(self, start=None, fingerprint=None):
        self._start = start or zygote.Zygote
        self._fingerprint = fingerprint or zygote.code_fingerprint
        self.current: zygote.Zygote | None = None
        self.failures = StartFailures()
        self._lock = threading.Lock()

    def get(self, compile_cache: Path | None, log=None) -> zygote.Zygote | None:
        """The zygote for ``compile_cache`` (started on first use), or None: launch the kernel instead."""
        if not fork_server.available():
            return None
        with self._lock:
            current = self.current
            if current is not None and (
                current.compile_cache != compile_cache or current.code != self._fingerprint() or not current.alive()
            ):
                current.close()
                self.current = None
            if self.current is None:
                started = time.monotonic()
                if not self.failures.due(started):
                    return None
                try:
                    self.current = self._start(compile_cache)
                except (OSError, RuntimeError) as exc:
                    self.failures.failed(f"{type(exc).__name__}: {exc}", time.monotonic())
                    if log is not None:
                        log.warning(
                            "grading kernels are launched one by one, not forked (%d failed start(s)): %s",
                            self.failures.count,
                            self.failures.reason,
                        )
                    return None
                self.failures.count = 0
                if log is not None:
                    log.info("kernel zygote started in %.1f s", time.monotonic() - started)
            return self.current

    def adopt(self, shared: zygote.Zygote) -> None:
        """Make ``shared`` (:meth:`zygote.Zygote.attached`) the process's zygote: a grading worker forked for a
        class run uses the run's one zygote. :meth:`get` still replaces it when it does not fit (another
        compilation cache, changed code, ended)."""
        with self._lock:
            if self.current is not None:
                self.current.close()
            self.current = shared

    def close(self) -> None:
        with self._lock:
            if self.current is not None:
                self.current.close()
                self.current = None


#: the grading process's kernel zygote
KERNEL_ZYGOTES = ZygoteRegistry()
# a grading process that exits normally waits for its zygote (and so counts its CPU time)
atexit.register(KERNEL_ZYGOTES.close)
