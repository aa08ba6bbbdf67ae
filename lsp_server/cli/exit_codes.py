"""Exit codes of every command: 0 ok, 2 bad usage or bad configuration, 1 anything else."""

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage: exit code 2, with the message on stderr."""
