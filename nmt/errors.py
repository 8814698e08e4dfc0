"""The one user-facing error type (inner code raises it with context; the CLI prints it as one line), and the one
way a warning reaches the user."""

import os
import sys
from typing import Callable


class NMTError(Exception):
    """An error the user can act on; its message is a single line."""


class ConfigError(NMTError):
    """A configuration file or override is invalid."""


def counted(count: int, noun: str) -> str:
    """A count in a message: '1 line', '2 lines', '0 columns', '12,000 lines'."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def environment_settings(prefixes: tuple[str, ...]) -> str:
    """The environment variables that start with one of `prefixes`, as a message names them (`NAME='value', ...`;
    "" for none): a library's settings that may be why it failed."""
    return ", ".join(f"{name}={value!r}" for name, value in sorted(os.environ.items()) if name.startswith(prefixes))


def warn(message: str) -> None:
    """A one-line warning on stderr (the default wherever code takes a `warn` callback)."""
    print(f"warning: {message}", file=sys.stderr)


class RepeatedWarning:
    """A warning that can come once per input (a sentence cut to the length limit): the first `shown` reach `warn`
    as they come, then one line says that later ones are counted, not shown, so that a big file cannot flood stderr;
    `summarize` gives the total at the end of a command."""

    def __init__(self, warn: Callable[[str], None], noun: str, shown: int = 3):
        self.warn, self.noun, self.shown, self.count = warn, noun, shown, 0

    def __call__(self, message: str) -> None:
        self.count += 1
        if self.count <= self.shown:
            self.warn(message)
        elif self.count == self.shown + 1:
            self.warn(f"more {self.noun}s: counted, no longer shown one by one")

    def summarize(self) -> None:
        """The total, where some went unshown."""
        if self.count > self.shown:
            self.warn(f"{counted(self.count, self.noun)} in all")
