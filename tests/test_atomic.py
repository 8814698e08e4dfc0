"""Atomic writes: the old file survives a failed write, and what is written gets the permissions a plain write would
have given (the umask's, or the replaced file's), not the owner-only mode of mkstemp/mkdtemp."""

import contextlib
import os
import stat
import sys

import pytest

from nmt.atomic import atomic_file, current_umask, install_dir, staging_dir, unwritable_reason, write_text_atomic

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_umasks_mode(tmp_path, mask):
    with umask(mask):
        assert current_umask() == mask
        write_text_atomic(tmp_path / "config.yaml", "a: 1\n")
    assert mode(tmp_path / "config.yaml") == 0o666 & ~mask
    assert (tmp_path / "config.yaml").read_text() == "a: 1\n"


def test_a_rewrite_keeps_the_files_own_mode(tmp_path):
    path = tmp_path / "best.pt"
    path.write_bytes(b"old")
    path.chmod(0o640)
    with umask(0o022), atomic_file(path) as handle:
        handle.write(b"new")
    assert path.read_bytes() == b"new" and mode(path) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "last.pt"
    path.write_bytes(b"precious")
    with pytest.raises(RuntimeError), atomic_file(path) as handle:
        handle.write(b"half")
        raise RuntimeError("disk full")
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_a_staged_directory_gets_the_umasks_mode_and_replaces_the_old_one(tmp_path):
    final = tmp_path / "prepared" / "abc"
    final.mkdir(parents=True)
    (final / "old.txt").write_text("old")
    with umask(0o022):
        staging = staging_dir(final)
        (staging / "train.src").write_text("new")
        install_dir(staging, final)
    assert mode(final) == 0o755
    assert [p.name for p in final.iterdir()] == ["train.src"]
    assert sorted(p.name for p in final.parent.iterdir()) == ["abc"]  # no staging or .old copy left behind


def test_why_a_folder_cannot_take_files_is_found_without_creating_it(tmp_path):
    assert unwritable_reason(tmp_path / "new" / "deeper") is None  # its parents would be made
    assert unwritable_reason(tmp_path) is None
    (tmp_path / "a-file").write_text("")
    assert unwritable_reason(tmp_path / "a-file" / "out") == f"{tmp_path / 'a-file'} is not a directory"
    assert unwritable_reason(tmp_path / "a-file") == f"{tmp_path / 'a-file'} is not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_file_system_without_unix_modes_still_takes_the_writes(tmp_path, monkeypatch):
    """FAT on a USB stick (mounted without `quiet`) refuses every chmod with EPERM: each atomic write failed there,
    the file written in full and then lost with its temp name. Other errors of chmod still stop the write."""
    import errno

    import nmt.atomic as atomic

    def refuse(path, mode, code=errno.EPERM):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(atomic.os, "chmod", refuse)
    write_text_atomic(tmp_path / "config.yaml", "a: 1\n")
    assert (tmp_path / "config.yaml").read_text() == "a: 1\n"
    staging = staging_dir(tmp_path / "prepared")
    install_dir(staging, tmp_path / "prepared")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "prepared"]  # no temp file left
    monkeypatch.setattr(atomic.os, "chmod", lambda path, mode: refuse(path, mode, errno.EIO))
    with pytest.raises(OSError, match="Input/output error"):
        write_text_atomic(tmp_path / "config.yaml", "a: 2\n")
    assert (tmp_path / "config.yaml").read_text() == "a: 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "prepared"]


WRITER = """
import sys, time
from pathlib import Path
from nmt.atomic import atomic_file
with atomic_file(Path(sys.argv[1])) as handle:
    handle.write(b"half")
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_temp_file_another_process_writes_is_told_from_one_a_killed_process_left(tmp_path):
    """A training that starts cleans its run's stale temp files; `nmt average` may be writing averaged.pt there at
    that moment (its temp file was removed and the average lost). The writer's flock tells the two apart, and the
    kernel drops it with a killed writer."""
    import signal
    import subprocess

    from nmt.atomic import is_being_written
    from nmt.run_dir import Run

    run = Run(tmp_path / "run")
    run.checkpoint_dir.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run.checkpoint_path("averaged"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
        (temp,) = run.checkpoint_dir.glob(".averaged.pt.*.tmp")
        left = run.checkpoint_dir / ".last.pt.k1ll3d.tmp"  # a killed save's, locked by no one
        left.write_bytes(b"\0" * 10)
        assert is_being_written(temp) and not is_being_written(left)
        assert run.clean_stale_temp_files() == [left]
        assert temp.exists() and not left.exists()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert not is_being_written(temp)
    assert run.clean_stale_temp_files() == [temp] and not temp.exists()


def test_without_locks_a_temp_file_changed_within_the_hour_counts_as_being_written(tmp_path, monkeypatch):
    """NFS without its lock service answers flock with ENOLCK: the file's age decides there."""
    import errno

    import nmt.atomic as atomic

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(atomic.fcntl, "flock", no_locks)
    with atomic_file(tmp_path / "averaged.pt") as handle:  # writes still work there
        handle.write(b"new")
        (temp,) = tmp_path.glob(".averaged.pt.*.tmp")
        assert atomic.is_being_written(temp)
        os.utime(temp, (0, 0))  # an old one: a killed process's
        assert not atomic.is_being_written(temp)
    assert (tmp_path / "averaged.pt").read_bytes() == b"new"
