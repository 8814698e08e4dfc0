"""A stop asked for by a signal, taken at the next update boundary: a checkpoint never holds the weights of one
step with the counters of another."""

from __future__ import annotations

import signal
import threading


# Ctrl-C, a scheduler's stop, and the hangup of the terminal training runs in (an ssh session that dropped): SIGHUP
# killed training where it stood, losing every update since the last save.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class StopRequest:
    """Ctrl-C, SIGTERM (a scheduler's stop) or SIGHUP sets a flag; the loop stops at the next update boundary, so a
    checkpoint never holds weights of one step with the counters of another. A second signal stops at once. A signal
    the process was started with ignored stays ignored."""

    def __init__(self):
        self.requested = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) == signal.SIG_IGN:
                    # Ignored by whoever started training, and inherited: `nohup` ignores SIGHUP so that a closed
                    # terminal leaves it running (a handler here stopped it there), a script's background job
                    # SIGINT. Their choice stands, as Python's own SIGINT handler leaves it.
                    continue
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
