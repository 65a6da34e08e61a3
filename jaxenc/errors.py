"""Errors that reach users: one line naming where the problem is and how to fix it."""

from __future__ import annotations

import re

# What str.splitlines() breaks on: escaped in messages (a corrupted file name or value may hold
# one), so that a message stays one line.
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class JaxencError(Exception):
    """Base class of every error the library raises on purpose. `exit_status`: what a command
    exits with when it reports one (2, as argparse and absl report usage errors)."""

    exit_status: int = 2


class DataError(JaxencError, ValueError):
    """Malformed or missing input data: the message names file, line (or sentence) and the fix,
    on one line (line breaks inside it are escaped)."""

    def __init__(self, problem: str, *, path: object = None, line: int | None = None,
                 fix: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        message = f"{where}{problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(_LINE_BREAKS.sub(lambda match: repr(match.group())[1:-1], message))
        self.path, self.line, self.fix = path, line, fix


class StructureError(DataError):
    """A tree that cannot be turned into structure arrays (malformed, cyclic, mismatched tokens)."""


class ParserUnavailableError(JaxencError, RuntimeError):
    """A parser back-end or its model is not installed; the message says how to install it."""


class ConfigError(JaxencError, ValueError):
    """A configuration names something unknown or contradicts an existing checkpoint."""


class NonFiniteError(JaxencError, ArithmeticError):
    """Training produced a loss or gradient norm that is nan or inf (the message names the step)."""


class DivergedError(NonFiniteError):
    """Training produced a finite loss beyond train.divergence_bound (the message names the step);
    a NonFiniteError, so that what handles a diverged run handles both."""


class WriteError(JaxencError, OSError):
    """A file of a run could not be written (a read-only folder, a full disk): the message names
    the path, the operating system's reason and the fix."""


class WorkdirInUseError(ConfigError):
    """Another process is training in the same run directory (the message names its PID)."""


class Preempted(JaxencError):
    """Training stopped on SIGTERM or SIGINT after saving a checkpoint; rerunning resumes it.

    `exit_status` is 128 + the signal number (143 for SIGTERM, 130 for SIGINT), what a shell
    reports for a process the signal ended, so schedulers and scripts see a stopped job, not a
    failed one."""

    def __init__(self, message: str, *, step: int, signum: int):
        super().__init__(message)
        self.step, self.signum = step, signum
        self.exit_status = 128 + signum
