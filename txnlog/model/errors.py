"""Errors a user can fix: one line that names the file, key or flag, and the fix.

The job and the ``txnlog`` command catch :class:`UsageError`, print ``str(err)``
on one line and exit with :attr:`UsageError.exit_code` (2). Anything else that
escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


class UsageError(Exception):
    """A mistake in how txnlog was called or configured (exit code 2).

    The message is one line: what is wrong, where (file, key or flag), and the fix.

    >>> raise UsageError("--as-of: cannot parse 'yesterday'; give ISO-8601 or epoch milliseconds")
    Traceback (most recent call last):
    ...
    txnlog.model.errors.UsageError: --as-of: cannot parse 'yesterday'; give ISO-8601 or epoch milliseconds
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        # Keep it one line whatever the caller passed: a wrapped OS or YAML
        # error message can contain newlines.
        super().__init__(" ".join(str(message).split()))


class ConfigError(UsageError):
    """A configuration file or a configuration value is wrong."""
