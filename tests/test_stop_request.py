"""nmt.stop_request: which signals a training takes as a stop request, and what it leaves as it found it."""

import os
import signal

from nmt.stop_request import StopRequest
from tests_helpers import stop_signals_at_defaults


def test_a_signal_is_a_request_and_the_handlers_are_restored():
    with stop_signals_at_defaults():
        with StopRequest() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_the_process_was_started_with_ignored_stays_ignored():
    """nohup's SIGHUP, a non-interactive shell's background job's SIGINT: sent, neither is a request."""
    with stop_signals_at_defaults():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with StopRequest() as stop:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop.requested
            os.kill(os.getpid(), signal.SIGTERM)  # not ignored: still a request
            assert stop.requested
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
