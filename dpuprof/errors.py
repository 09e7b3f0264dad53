"""Errors that the CLI turns into one clear line and exit status 2 (no traceback), and the exit of
an interrupted command (here because both ``__main__`` and ``cli`` need it, before and after the
CLI is imported)."""

import sys


class UserError(Exception):
    """Bad input or a missing prerequisite. ``str(err)`` is the one line shown to the user."""

    exit_code = 2


def exit_interrupted() -> None:
    """Exit as an interrupted command (130) after a Ctrl-C or SIGINT that arrived before dpuprof's
    own handlers were in place (while importing, or parsing the command line): nothing was
    started or written, and ``record`` says so in the words it uses once its handlers are up."""
    if sys.argv[1:2] == ["record"]:
        print("dpuprof: stopped by SIGINT before the command started; nothing recorded", file=sys.stderr)
    sys.exit(130)
