"""`python -m nmt ARGS` in a process of its own, started in milliseconds rather than seconds.

Importing torch takes ~3.3 s of every `python -m nmt` on a 2-core CPU: most of the time the suite spent in its ~200
CLI calls. Here each call is a child forked from a server that imported torch and the other libraries once
(tests/cli_fork_server.py): a process of its own, with the call's arguments, environment, working directory and
standard streams, that imports nmt and runs the command as the interpreter would, exit status included.

Plain subprocesses instead when NMT_TEST_SUBPROCESS=1, or when a call's environment differs from the server's in
anything other than the variables read after the fork (READ_AFTER_FORK): what torch and Python read as they import
cannot change in a child.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

SERVER = Path(__file__).with_name("cli_fork_server.py")
# nmt's own; pytest's (the running test's name); what a test that trains or compiles in its own process leaves set
# there: oneDNN's cache bound (nmt sets it; oneDNN reads it as it builds its first kernel) and inductor's settings (it
# sets its cache's place and a pointer of its C++ code's; read as it compiles, never by `import torch`); torchrun's
# layout (nmt reads it as training starts, torch.distributed as its process group does) and sacrebleu's bootstrap
# seed (read as it resamples).
READ_AFTER_FORK = ("NMT_", "PYTEST_", "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "TORCHINDUCTOR_", "_TORCHINDUCTOR_",
                   "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SACREBLEU_SEED")


class ForkServer:
    """The server process of this test process, started at its first call."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = dict(os.environ)
        self.process = subprocess.Popen([sys.executable, str(SERVER), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=self.env)
        theirs.close()
        self.channel = ours
        self.lock = threading.Lock()  # one request and its two answers at a time (the server runs one child)
        atexit.register(self.close)

    def close(self) -> None:
        self.channel.close()  # the server reads the end of its channel and exits
        self.process.wait(timeout=30)

    def serves(self, env: dict) -> bool:
        """Whether a child of the server runs as a fresh process would with `env`; if not, a warning names what
        differs (in pytest's summary: the calls that then pay torch's import)."""
        differing = {key for key in env.keys() | self.env.keys() if env.get(key) != self.env.get(key)}
        unsafe = sorted(key for key in differing if not key.startswith(READ_AFTER_FORK))
        if unsafe:
            warnings.warn(f"a plain subprocess for the CLI: the environment differs from its fork server's in {unsafe}")
        return self.process.poll() is None and not unsafe

    def run(self, args: list[str], env: dict, cwd: str, stdio: list[int], timeout: float | None) -> int:
        request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
        with self.lock:
            socket.send_fds(self.channel, [request], stdio)
            pid = self.answer(timeout=30)["pid"]
            try:
                return self.answer(timeout)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)  # as subprocess.run does on its timeout
                self.answer(timeout=30)
                raise

    def answer(self, timeout: float | None) -> dict:
        self.channel.settimeout(timeout)
        message = self.channel.recv(1 << 16)
        if not message:
            raise RuntimeError(f"the CLI's fork server ({SERVER.name}) stopped: run with NMT_TEST_SUBPROCESS=1")
        return json.loads(message)


_server: ForkServer | None = None
forked_calls = 0  # calls the server answered


def run_cli(args: list[str], env: dict, cwd=None, input: str | bytes | None = None, text: bool = True,
            timeout: float | None = None, **popen) -> subprocess.CompletedProcess:
    """What subprocess.run([python, "-m", "nmt", *args], capture_output=True, ...) returns, text decoded as it
    decodes it (the locale's encoding, universal newlines). `popen`: what only a subprocess of this process can take
    (pass_fds, preexec_fn), which then runs as one."""
    global _server, forked_calls
    command = [sys.executable, "-m", "nmt", *args]
    plain = os.environ.get("NMT_TEST_SUBPROCESS") == "1" or bool(popen)
    if _server is None and not plain:
        _server = ForkServer()
    if plain or not _server.serves(env):
        return subprocess.run(command, capture_output=True, env=env, cwd=cwd, input=input, text=text,
                              timeout=timeout, **popen)
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        if input is not None:
            stdin.write(input.encode(encoding) if isinstance(input, str) else input)
            stdin.seek(0)
        try:
            returncode = _server.run(args, env, str(cwd or os.getcwd()), [f.fileno() for f in (stdin, stdout, stderr)],
                                     timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(command, timeout) from None
        forked_calls += 1
        outputs = []
        for stream in (stdout, stderr):
            stream.seek(0)
            data = stream.read()
            outputs.append(data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n") if text else data)
    return subprocess.CompletedProcess(command, returncode, *outputs)
