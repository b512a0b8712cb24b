"""What the commands share (evaluate, export, benchmark, the Ray and Spark launchers): one line naming the problem
instead of a traceback, and absl's start with a bad flag turned into that line (`flag_error_text`, hvd_dqn.train's
too: a flagfile that is not there lists the presets); and for the commands that print reports, a reader that
closes the pipe early ending them quietly (`exit_with`).

    COMMAND = Command("hvd_dqn.evaluate")
    ...
    COMMAND.fail("--episodes=0: must be a positive integer")   # "hvd_dqn.evaluate: error: ...", exit code 2
    def run() -> None:
        COMMAND.run(main)

hvd_dqn.train fails its own way, since under horovodrun only rank 0 may print the line.
"""
from __future__ import annotations

import os
import pathlib
import re
import sys

from absl import app, flags

# The presets, beside the package in the repository (an install from a clone, editable or not, keeps them there).
CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"


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
            self.fail(flag_error_text(error))

    def run(self, main) -> None:
        app.run(main, flags_parser=self.parse_flags)


def exit_with(main) -> None:
    """Runs a printing command's `main` and exits with its code. A reader that stops early (`... | head`) closes
    the pipe under the command; it then ends quietly, as Unix tools do, instead of with a BrokenPipeError
    traceback. stdout is pointed at /dev/null first so that the interpreter's own flush at exit does not raise
    again (the advice in Python's documentation of the signal module, "Note on SIGPIPE")."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)


def flag_error_text(error: Exception) -> str:
    """absl's message for a bad command line as one line; a flagfile that cannot be read also lists the presets
    in configs/ (the closest first), since a mistyped preset is the usual cause."""
    text = str(error).replace("ERROR:: ", "").strip()
    if isinstance(error, flags.CantOpenFlagFileError):
        named = re.search(r"No such file or directory: '([^']*)'", text)
        if named:
            return missing_flagfile_text(named.group(1))
    return text


def missing_flagfile_text(path: str) -> str:
    import difflib

    presets = sorted(preset.name for preset in CONFIGS.glob("*.flags"))
    if not presets:
        return f"--flagfile={path}: no such file"
    stems = [preset[:-len(".flags")] for preset in presets]  # the shared suffix would make any name look close
    close = difflib.get_close_matches(os.path.basename(path).removesuffix(".flags"), stems, n=1, cutoff=0.6)
    hint = f"did you mean configs/{close[0]}.flags? " if close else ""
    return f"--flagfile={path}: no such file; {hint}the presets in configs/ are {', '.join(presets)}"
