"""What the single-process entry points (evaluate, benchmark) share: one-line errors and flag parsing.

hvd_dqn.train has its own `fail`, since under horovodrun only rank 0 may print the line.
"""
from __future__ import annotations

import sys

from absl import flags


def fail(program: str, message: str) -> None:
    """Ends the program with exit code 2 and one line naming the problem (no traceback)."""
    print(f"{program}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def flags_parser(program: str):
    """An absl `flags_parser` that turns a bad flag into `fail`'s one line."""

    def parse(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            fail(program, str(error).replace("ERROR:: ", ""))

    return parse
