"""Directory locks: a directory in use is refused, and a file system that keeps no locks is not taken for one."""

import errno
import fcntl
import os

import pytest

from nmt.errors import NMTError
from nmt.lock import DirectoryLock, is_locked


def test_a_held_directory_is_refused_and_free_again_once_released(tmp_path):
    with DirectoryLock(tmp_path):
        assert is_locked(tmp_path)
        with pytest.raises(NMTError, match=f"^{tmp_path} is in use by pid {os.getpid()}; wait for it"):
            with DirectoryLock(tmp_path):
                pass
    assert not is_locked(tmp_path)
    with DirectoryLock(tmp_path):
        pass


def _flock_failing_with(code):
    def flock(handle, operation):
        raise OSError(code, os.strerror(code))
    return flock


def test_a_file_system_without_locks_is_used_with_a_warning(tmp_path, monkeypatch, capsys):
    """NFS without its lock service answers flock with ENOLCK: that was "in use by another process", so a run or a
    data directory there could never be used."""
    monkeypatch.setattr(fcntl, "flock", _flock_failing_with(errno.ENOLCK))
    entered = False
    with DirectoryLock(tmp_path, wait=True):
        entered = True
    assert entered
    said = capsys.readouterr().err
    assert said == (f"warning: cannot lock {tmp_path} (No locks available: its file system keeps no locks, e.g. NFS "
                    "without a lock service): nothing stops two processes using it at once\n")


def test_another_failure_to_lock_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(fcntl, "flock", _flock_failing_with(errno.EIO))
    with pytest.raises(NMTError, match=f"^cannot lock {tmp_path}: Input/output error$"):
        with DirectoryLock(tmp_path):
            pass
