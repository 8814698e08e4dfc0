"""The one user-facing error type: inner code raises it with context; the CLI prints it as one line."""


class NMTError(Exception):
    """An error the user can act on; its message is a single line."""


class ConfigError(NMTError):
    """A configuration file or override is invalid."""
