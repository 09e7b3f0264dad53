"""Errors that the CLI turns into one clear line and exit status 2 (no traceback)."""


class UserError(Exception):
    """Bad input or a missing prerequisite. ``str(err)`` is the one line shown to the user."""

    exit_code = 2
