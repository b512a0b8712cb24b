"""What the single-process commands share (evaluate, export, benchmark, the Ray and Spark launchers): one line
naming the problem instead of a traceback, and absl's start with a bad flag turned into that line.

    COMMAND = Command("hvd_dqn.evaluate")
    ...
    COMMAND.fail("--episodes=0: must be a positive integer")   # "hvd_dqn.evaluate: error: ...", exit code 2
    def run() -> None:
        COMMAND.run(main)

hvd_dqn.train fails its own way, since under horovodrun only rank 0 may print the line.
"""
from __future__ import annotations

import sys

from absl import app, flags


class Command:
    def __init__(self, program: str):
        self.program = program

    def fail(self, message: str) -> None:
        """Ends the program with exit code 2 and one line naming the problem (no traceback)."""
        print(f"{self.program}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)

    def parse_flags(self, argv):
        """absl's flag parsing, a bad flag ending in `fail`'s one line."""
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            self.fail(str(error).replace("ERROR:: ", ""))

    def run(self, main) -> None:
        app.run(main, flags_parser=self.parse_flags)
