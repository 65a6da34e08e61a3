"""What every command-line entry point shares: a JaxencError is reported as one line, exit 2.

    @cli.reports_errors
    def main(argv=None): ...

`python -m train.main`, `train.compare`, `eval.transfer`, `jaxenc.structures.stats` and the
`bench/` scripts all use it, so bad input (a missing file, a malformed line, a refused config)
prints `error: <file:line: problem (fix: ...)>` on stderr instead of a traceback, with the
error's `exit_status` (2; a run stopped by SIGTERM / SIGINT after saving a checkpoint,
`jaxenc.errors.Preempted`: 143 / 130). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

from jaxenc.errors import JaxencError

EXIT_STATUS = JaxencError.exit_status  # 2, as argparse and absl report usage errors

_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


def fail(message: object, status: int = EXIT_STATUS) -> NoReturn:
    """Prints `error: <message>` on stderr, on one line, and exits with `status`."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"error: {text}", file=sys.stderr)
    sys.exit(status)


def reports_errors(main: Callable[_Params, _Result]) -> Callable[_Params, _Result]:
    """Decorates an entry point: a JaxencError it raises is reported by `fail`, with the error's
    exit status."""

    @functools.wraps(main)
    def wrapper(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        try:
            return main(*args, **kwargs)
        except JaxencError as error:
            fail(error, error.exit_status)

    return wrapper
