"""Directory locks (flock): the kernel releases them when the holder dies, so a killed process never leaves one."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from nmt.errors import NMTError, warn


# What flock says on a file system that keeps no locks (NFS mounted with `nolock` or without its lock service, some
# FUSE file systems): the directory is usable, just not lockable.
NO_LOCKS_HERE = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL)


class DirectoryLock:
    """An exclusive lock on `directory/.lock`. `wait=False` refuses at once when another process holds it."""

    def __init__(self, directory: Path, wait: bool = False):
        self.path, self.wait, self.handle = Path(directory) / ".lock", wait, None

    def __enter__(self) -> "DirectoryLock":
        if self.path.is_symlink():
            raise NMTError(f"{self.path} is a symbolic link; refusing to use it as a lock")
        try:
            self.handle = open(self.path, "a+")
        except OSError as err:
            raise NMTError(f"cannot lock {self.path.parent}: {err.strerror}") from None
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "another process"
            self.handle.close()
            raise NMTError(f"{self.path.parent} is in use by {holder}; wait for it or use another --run-dir") from None
        except OSError as err:
            if err.errno not in NO_LOCKS_HERE:
                self.handle.close()
                raise NMTError(f"cannot lock {self.path.parent}: {err.strerror}") from None
            # Every error was "in use by another process" before, so a run on such a disk could never train.
            warn(f"cannot lock {self.path.parent} ({err.strerror}: its file system keeps no locks, e.g. NFS without "
                 "a lock service): nothing stops two processes using it at once")
            return self
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()}\n")
        self.handle.flush()
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()


def is_locked(directory: Path) -> bool:
    """Whether a process holds `directory/.lock` now (a training of that run), asked without taking it: the file is
    opened for reading and probed with a shared lock, so nothing is written."""
    path = Path(directory) / ".lock"
    if not path.is_file() or path.is_symlink():
        return False
    try:
        with open(path) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False
