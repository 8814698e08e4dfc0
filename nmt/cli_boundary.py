"""Where the command line meets the process: its streams, signals, arguments and exit codes.

nmt/cli.py holds the commands and `main`, which runs them; this module holds what `main` does around them, so that
whatever a command raises ends as one line on stderr and an exit code (2 for the user's input or the environment,
130 interrupted, 141 when the reader of the output went away, 1 for an internal error), never a traceback.
"""

from __future__ import annotations

import codecs
import errno
import inspect
import io
import os
import re
import signal
import sys
import traceback
import typing
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

import typer

from nmt.errors import environment_settings


# What typer>=0.2x returns for a KeyboardInterrupt (Ctrl-C, or SIGTERM by interrupt_on_sigterm) that it caught, where
# older typers raised click's Abort: a silent exit 130 that left a stopped `nmt prepare` without a word. No nmt command
# returns 130 of its own.
TYPER_INTERRUPTED = 130


def interrupt_on_sigterm(signum, frame):
    # A scheduler's stop: unwind like Ctrl-C so temp files and staging directories are removed on the way out.
    # (Training installs its own handler that stops at an update boundary.)
    raise KeyboardInterrupt


WRITING_STDOUT = "writing the standard output"  # what an error of stdout's names as its file


class ClosedStream:
    """Stands in for a standard stream the shell closed (`<&-`, `>&-`), which Python leaves None: its first use was
    an internal AttributeError ('NoneType' object has no attribute 'isatty'). Now reading or writing it is an
    OSError naming it, said as "error: Bad file descriptor (reading the standard input)"."""

    encoding = "utf-8"  # asked of sys.stdout by libraries as they load (torch's, with getattr and a default)
    errors = "strict"
    _INPUT_OUTPUT = frozenset({"read", "readline", "readlines", "buffer", "write", "writelines", "fileno"})

    def __init__(self, use: str):
        self.use = use  # "reading the standard input", ...

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        pass  # nothing was ever written: the interpreter's flush at exit has nothing to fail on

    def __getattr__(self, name):
        if name in self._INPUT_OUTPUT:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), self.use)
        raise AttributeError(name)


def standard_streams_present() -> None:
    """Closed standard streams replaced: stdin and stdout by a `ClosedStream` (an error once used), stderr by the
    null device (the diagnostics were sent away; the exit code still tells)."""
    if sys.stdin is None:
        sys.stdin = ClosedStream("reading the standard input")
    if sys.stdout is None:
        sys.stdout = ClosedStream(WRITING_STDOUT)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's, closed at its exit


class ReaderGone(Exception):
    """Whoever read nmt's output went away (`nmt translate < big.txt | head`): nothing went wrong in nmt."""


class PipeWatch:
    """sys.stdout, its broken pipe raised as ReaderGone: click turns an EPIPE into a bare exit 1 (an internal
    error by nmt's codes) before main() sees it. Any other failed write (`> /dev/full`, a file past `ulimit -f`)
    names the standard output, which "error: No space left on device" alone did not. Everything but write and
    flush goes to the stream itself."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise ReaderGone() from None
        except OSError as err:
            raise _named_standard_output(err)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ReaderGone() from None
        except OSError as err:
            raise _named_standard_output(err)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class StderrWatch:
    """sys.stderr whose reader may go away mid-command (`nmt train ... 2>&1 | head`, a `tee` or an ssh session that
    ended): the next write was a BrokenPipeError that ended training where it stood, without a checkpoint, and its
    error could not be said either (exit 1). Now the rest goes to the null device and the command is stopped as a
    scheduler stops it (SIGTERM): training saves a checkpoint at the next update boundary and ends, anything else
    unwinds as after Ctrl-C; `main` then exits 141, quietly, as for a reader of stdout that went away."""

    def __init__(self, stream):
        self._stream, self.reader_gone = stream, False

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as err:
            self._gone(err)
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except OSError as err:
            self._gone(err)

    def _gone(self, err: OSError) -> None:
        """EPIPE: the reader left (stop, as above). EIO: the terminal is gone under a command that outlives it
        (`nmt train ... & disown`, then the window closed): it goes on, its record in RUN/train.log; that write
        ended training at once too. Anything else (a full disk under `2> log`) is raised as it was."""
        if err.errno not in (errno.EPIPE, errno.EIO):
            raise err
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())  # torch's C++ writes too, and what is buffered
        if err.errno == errno.EPIPE and not self.reader_gone:
            self.reader_gone = True
            signal.raise_signal(signal.SIGTERM)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _named_standard_output(err: OSError) -> OSError:
    if err.filename is None:
        err.filename = WRITING_STDOUT
    return err


def write_utf8(stream):
    """`stream` (stdout, stderr) set to write UTF-8, as nmt reads it whatever the locale (stdin's bytes, every file):
    under a Latin-1 locale, LC_ALL=C without Python's UTF-8 mode or PYTHONIOENCODING=ascii, a translation's "É" was
    an internal UnicodeEncodeError, and `nmt translate < in.txt > out.txt` wrote another encoding than it read."""
    if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
        stream.reconfigure(encoding="utf-8", errors=stream.errors)
    return stream


def out_of_memory(err: Exception) -> str | None:
    """What an allocation that failed for want of memory says of itself, or None for any other error: torch's CUDA
    OutOfMemoryError (its first sentences), its CPU allocator's RuntimeError (the size it asked for) or Python's
    MemoryError. nmt/memory.py refuses what is certain not to fit before it starts; this is what it did not foresee."""
    text = str(err)
    if type(err).__name__ == "OutOfMemoryError":  # torch's, a RuntimeError; named so the CLI need not import torch
        return "out of memory: " + ". ".join(text.split(". ")[:2]).strip()
    if "can't allocate memory" in text:  # "[enforce fail at alloc_cpu.cpp:127] ... you tried to allocate N bytes"
        asked = text.split("tried to allocate ")[-1].split(" bytes")[0]
        return (f"out of memory: tried to allocate {int(asked) / 2**30:,.1f} GiB" if asked.isdigit()
                else "out of memory (torch's CPU allocator)")
    return "out of memory (MemoryError)" if isinstance(err, MemoryError) else None


def library_unmapped(err: Exception) -> str | None:
    """What a library that could not be mapped into memory says (torch's libtorch_cpu.so under `ulimit -v`), or None:
    the loader's "failed to map segment from shared object" was an internal ImportError."""
    if isinstance(err, ImportError) and "failed to map segment" in str(err):
        library = str(err).split(":")[0].strip()
        return (f"cannot load {library}: no memory to map it into (an address-space limit such as `ulimit -v`, or "
                "the machine's memory)")
    return None


def drop_settings_meaning_unset() -> None:
    """Environment settings that mean what their absence means, dropped before the library that misreads them loads:
    an empty TORCH_LOGS (`export TORCH_LOGS=` to turn torch's logs off), on which torch 2.13's import fails (an
    AttributeError in torch._logging); COLUMNS=0 (a terminal that reports no size), which Python's
    shutil.get_terminal_size reads as unset and rich as a width of 0: `nmt --help` printed one empty line."""
    for name, meaning_unset in (("TORCH_LOGS", ""), ("COLUMNS", "0")):
        if os.environ.get(name) == meaning_unset:
            del os.environ[name]


def torch_logs_refused(err: Exception) -> str | None:
    """What to say where torch's import refused TORCH_LOGS, or None. torch raises a ValueError for a setting it does
    not know, and answers TORCH_LOGS=help (its own advice) with one whose message is the list of settings: both were
    an internal error of nmt's."""
    setting = os.environ.get("TORCH_LOGS")
    if setting is None or not isinstance(err, ValueError):
        return None
    message = str(err).strip()
    if message.startswith("TORCH_LOGS Info"):
        return f"{message}\n(torch's answer to TORCH_LOGS={setting}; unset it to run nmt)"
    if message.startswith("Invalid log settings"):
        return f"TORCH_LOGS={setting!r} is not a setting torch knows (TORCH_LOGS=help lists them; unset it to run nmt)"
    return None


# Libraries that convert settings from the environment as they are imported, so that a value they cannot read
# (TQDM_MININTERVAL=abc, TORCHINDUCTOR_COMPILE_THREADS=abc, TORCH_COMPILE_DEBUG=abc) was an internal ValueError of
# whichever nmt command loaded them: (library, the code that reads them: a file and, where it holds other code too,
# the function, the variables' prefixes).
_SETTINGS_READERS = (
    ("tqdm", "tqdm/utils.py", "wrap", ("TQDM_",)),  # tqdm.utils.envwrap
    ("torch", "torch/*/config.py", None, ("TORCH", "PYTORCH_")),  # torch._inductor.config, torch._dynamo.config
    ("torch", "torch/utils/_config_module.py", None, ("TORCH", "PYTORCH_")),
    ("CTranslate2", "nmt/ct2_engine.py", None, ("CT2_",)),  # CT2_FORCE_CPU_ISA=abc: at the first translation
)


def library_settings_refused(err: Exception) -> str | None:
    """What to say where a library could not read its settings from the environment as it loaded, or None."""
    if not isinstance(err, (ValueError, TypeError)):
        return None
    frames = traceback.extract_tb(err.__traceback__)
    for library, reader, function, prefixes in _SETTINGS_READERS:
        settings = environment_settings(prefixes)  # none set: the error is not theirs
        if settings and any(Path(frame.filename).match(reader) and function in (None, frame.name) for frame in frames):
            return f"{library} cannot read its settings from the environment ({settings}): {err}; correct or unset them"
    return None


def os_error_place(err: OSError) -> str:
    """Where an OSError happened, for its one line: the path, and the environment variable that named it where one
    did (TORCHINDUCTOR_CACHE_DIR=/proc/x: torch makes that folder as it loads its compiler, which `nmt train` does
    even without compiling; the path alone did not say where it came from)."""
    if not err.filename:
        return ""
    path = os.fsdecode(err.filename) if isinstance(err.filename, (str, bytes)) else str(err.filename)
    named_by = sorted(name for name, value in os.environ.items()
                      if value == path and name not in ("PWD", "OLDPWD"))
    return f" ({path}{', from ' + ' and '.join(named_by) if named_by else ''})"


def environment_refused(err: Exception) -> str | None:
    """What to say where the machine or the shell's settings, not nmt, stopped a library as it loaded; or None."""
    return library_unmapped(err) or torch_logs_refused(err) or library_settings_refused(err)


def is_usage_error(err: Exception) -> bool:
    """click's UsageError (typer re-exports or vendors click, depending on its version): exit code 2 and a message."""
    return getattr(err, "exit_code", None) == 2 and callable(getattr(err, "format_message", None))


def usage_message(err) -> str:
    ctx = getattr(err, "ctx", None)
    command = f"nmt {ctx.info_name} --help" if ctx is not None and ctx.parent is not None else "nmt --help"
    return f"{' '.join(err.format_message().split())} (see {command})"


def without_debug(args: list[str]) -> tuple[list[str], bool]:
    """The arguments without --debug, and whether it was there: errors say "re-run with --debug", and users put it
    after the command (`nmt train ... --debug`), where the root option alone was "No such option". After `--` it
    is an argument (a sentence to translate) and stays."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != "--debug"] + args[end:]
    return kept, len(kept) != len(args)


def debug_asked(environ: typing.Mapping[str, str]) -> bool:
    """Whether NMT_DEBUG asks for tracebacks, as `--debug` does: NMT_DEBUG=0 (or false, no, off, empty) turned them on
    before, being a non-empty string."""
    return environ.get("NMT_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


def path_option_problem(app: typer.Typer, args: list[str]) -> str | None:
    """What is wrong with a value given to an option that takes a file or folder, or None:
    - "" (`--run "$RUN"` with RUN unset): Path("") is ".", so `nmt train --run ""` trained into the current
      directory, `--data-dir ""` downloaded the corpus there, and other commands said ". is a directory";
    - a URL (`--config https://host/c.yaml`, `--src https://...`): no such option reads one, and pathlib folded it
      into a path ("config file not found: https:/host/c.yaml"); a file:// URL is answered with its path.
    The options are read from the commands' signatures, so every path option is covered as it is declared; the
    value of another option is skipped, never taken for one."""
    for option, value in _path_option_values(app, args):
        if not value:
            return f"{option} is empty (an unset shell variable?): name a file or folder, or leave {option} out"
        if _URL.match(value):
            parsed = urllib.parse.urlparse(value)
            if parsed.scheme.lower() == "file":
                return f"{option} takes a path, not a file:// URL: {option} {urllib.request.url2pathname(parsed.path)}"
            return f"{option} takes a file or folder on this machine, not a URL ({value}): download it, name the copy"
    return None


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _path_option_values(app: typer.Typer, args: list[str]) -> Iterator[tuple[str, str]]:
    """(option, value) for each option of the command in `args` that takes a file or folder, as given."""
    command = next((info.callback for info in app.registered_commands if args
                    and (info.name or info.callback.__name__.replace("_", "-")) == args[0]), None)
    if command is None:
        return
    hints = typing.get_type_hints(command)
    paths, valued = set(), set()
    for name, parameter in inspect.signature(command).parameters.items():
        if isinstance(parameter.default, typer.models.OptionInfo) and hints[name] is not bool:
            names = parameter.default.param_decls or (f"--{name.replace('_', '-')}",)
            valued.update(names)
            if _names_a_path(hints[name]):
                paths.update(names)
    position = 1
    while position < len(args) and args[position] != "--":
        option, equals, value = args[position].partition("=")
        if option in paths and equals:
            yield option, value
        elif args[position] in valued:
            if args[position] in paths and position + 1 < len(args):
                yield args[position], args[position + 1]
            position += 1  # its value
        position += 1


def _names_a_path(annotation) -> bool:
    """Path, Optional[Path], List[Path]..."""
    return annotation is Path or any(_names_a_path(inner) for inner in typing.get_args(annotation))
