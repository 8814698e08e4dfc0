"""Atomic file writes and staged directory installs: the one place that knows how nothing on disk is half-written.

- `atomic_file(path)`: a fresh temp file beside `path` (mkstemp: O_EXCL, so never through a planted link), flushed
  and fsynced, renamed over `path` on success and removed on any failure — the previous file survives a crash, a
  full disk or Ctrl-C;
- `staging_dir(final)` + `install_dir(staging, final)`: build a directory under a temp name, then swap it in with
  renames (an old copy is kept until the new one is in place).

mkstemp and mkdtemp create owner-only entries (0600, 0700); what they become gets the mode a plain `open` or
`mkdir` would have given (the umask's), or the mode of the file it replaces, so that a run or a prepared corpus on a
shared disk stays readable by whoever could read it before (a server's account, a colleague); on a file system
without Unix modes (FAT on a USB stick) the mount's mode stands (`_give_mode`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import IO, Iterator


def current_umask() -> int:
    """The process's umask. Linux reports it (/proc/self/status), which leaves it alone while other threads (the
    checkpoint writer, the prefetcher) create files; elsewhere it is set and put back."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    """A replaced file keeps its permission bits (a user's chmod survives a rewrite); a new one gets the umask's."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def _give_mode(path: str | Path, mode: int) -> None:
    """chmod where the file system keeps Unix modes. FAT and exFAT (a USB stick, an SD card) mounted without `quiet`
    refuse every chmod with EPERM, and some network and FUSE file systems with ENOTSUP: there the file keeps the mode
    the mount gives it, rather than the write fail (every run and corpus write on such a disk failed)."""
    try:
        os.chmod(path, mode)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "wb", fsync: bool = True) -> Iterator[IO]:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    held = _hold_while_written(fd)
    try:
        _give_mode(tmp, _mode_for(path))  # mkstemp's 0600 otherwise (module docstring)
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if "b" not in mode else {})) as handle:
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        if held is not None:
            os.close(held)


def _hold_while_written(fd: int) -> int | None:
    """An flock on the temp file until it is renamed, so that `is_being_written` tells it from one a killed process
    left (the kernel drops the lock with its holder). Held through a duplicate descriptor: the lock belongs to the
    open file, which the duplicate keeps open after the writer's own is closed, up to the rename. None where the file
    system keeps no locks."""
    held = os.dup(fd)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(held)
        return None
    return held


def is_being_written(temp: Path, unlocked_for_s: float = 3600.0) -> bool:
    """Whether another process is writing `temp` now (an `atomic_file` temp: it holds an flock on it). Where the file
    system keeps no locks, a file changed within `unlocked_for_s` counts as being written."""
    try:
        with open(temp, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except FileNotFoundError:
        return False
    except OSError:
        try:
            return time.time() - temp.stat().st_mtime < unlocked_for_s
        except OSError:
            return False
    return False


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_file(path, "w", fsync=False) as handle:
        handle.write(text)


def copy_file_atomic(source: Path, target: Path) -> None:
    with atomic_file(target, "wb", fsync=False) as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out)


def unwritable_reason(folder: Path) -> str | None:
    """Why files cannot be made in `folder` (existing or not: then in the nearest folder above it that exists, which
    must take the rest), or None if they can. Nothing is left behind: the probe is an anonymous temp file, and what
    the file system says (a read-only mount, an ACL) is what counts."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        return f"{err.strerror} ({probe})" if probe != Path(folder) else err.strerror
    return None


def staging_dir(final: Path) -> Path:
    """A fresh hidden directory beside `final` (`.<name>.<random>`) to build the new contents in."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    _give_mode(staging, 0o777 & ~current_umask())  # mkdtemp's 0700 otherwise (module docstring)
    return staging


def install_dir(staging: Path, final: Path) -> None:
    """Replace `final` by `staging` with renames, so a good old copy survives until the new one is complete."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
