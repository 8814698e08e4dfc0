"""A server process that has imported torch and the other libraries every `nmt` command loads, and forks a fresh
`python -m nmt` per request (tests/cli_process.py is its client). Run as a script: `python cli_fork_server.py FD`,
FD one end of a SOCK_SEQPACKET socket pair.

A request is one message, a JSON object (args, cwd, env), with three file descriptors attached: the child's stdin,
stdout and stderr. The server answers {"pid": ...} when the child starts and {"returncode": ...} when it ends (as
subprocess reports it: -N for a signal). One child at a time: a test waits for its command.

Nothing of nmt is imported here, and no torch operator runs: each child imports nmt as a fresh process would, in
the order the command takes, and starts torch's thread pools itself.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import socket
import sys
import threading
import traceback

import sacrebleu  # noqa: F401 - imported once here, not by every command
import sentencepiece  # noqa: F401
import torch  # noqa: F401
import tqdm  # noqa: F401
import typer  # noqa: F401
import yaml  # noqa: F401


def exit_code(stop: SystemExit) -> int:
    """The status the interpreter gives a SystemExit (a message goes to stderr with status 1)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code & 0xFF
    print(stop.code, file=sys.stderr)
    return 1


def run_nmt(request: dict, stdio: list[int]) -> None:
    """In the child: the call's streams, directory and environment, then `python -m nmt ARGS` to the exit the
    interpreter makes (non-daemon threads joined, atexit handlers run, streams flushed). Never returns."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)  # sys.stdin/stdout/stderr (never read or written here) now use the call's files
        os.close(fd)
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["-m", *request["args"]]
        try:
            runpy.run_module("nmt", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = exit_code(stop)
        except BaseException:  # noqa: BLE001 - what the interpreter prints for an uncaught exception
            traceback.print_exc()
            code = 1
        threading._shutdown()  # what Py_Finalize does first: wait for the non-daemon threads
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                code = 120  # the interpreter's status when flushing at exit fails
    finally:
        os._exit(code)


def serve(channel: socket.socket) -> None:
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        if not message:  # the test process is gone
            return
        pid = os.fork()
        if pid == 0:
            channel.close()
            run_nmt(json.loads(message), fds)
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
