"""The commands' former home, kept for version 0.3 only: `python -m hvd_dqn.tools.NAME` runs the command where it
lives now (measuring in hvd_dqn.measure, planning in hvd_dqn.plan, reports in hvd_dqn.reports). Each module
here is one line naming the new place; import from there."""
from __future__ import annotations

import importlib
import runpy
import sys


def moved(name: str, new: str) -> None:
    """Run as `python -m`, runs the module at its new place as the program; imported, is that module."""
    if name == "__main__":
        runpy.run_module(new, run_name="__main__", alter_sys=True)
    else:
        sys.modules[name] = importlib.import_module(new)
