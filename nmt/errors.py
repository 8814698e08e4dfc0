"""The one user-facing error type (inner code raises it with context; the CLI prints it as one line), and the one
way a warning reaches the user."""

import sys


class NMTError(Exception):
    """An error the user can act on; its message is a single line."""


class ConfigError(NMTError):
    """A configuration file or override is invalid."""


def counted(count: int, noun: str) -> str:
    """A count in a message: '1 line', '2 lines', '0 columns'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def warn(message: str) -> None:
    """A one-line warning on stderr (the default wherever code takes a `warn` callback)."""
    print(f"warning: {message}", file=sys.stderr)
