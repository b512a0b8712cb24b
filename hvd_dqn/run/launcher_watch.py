"""A rank that outlives its launcher stops: the launcher processes above a rank (horovodrun, mpirun, the shell
horovodrun turns into) are watched, and when one of them is gone the rank asks to stop as if it had received
SIGTERM: the ranks agree at their next stop poll, write a checkpoint and exit.

Why the ranks watch, rather than the launcher passing the signal on: `horovodrun` over Open MPI replaces itself with
`sh -c "mpirun ..."`, and a SIGTERM (or SIGHUP, or SIGKILL) to that shell ends the shell alone: mpirun and the ranks
trained on, orphaned, writing checkpoints into a logdir the next job was then refused. horovodrun over Gloo passes
SIGTERM on itself, and its per-rank helpers end the ranks when it is killed; watching costs nothing there and covers
`mpirun` started by hand too. Where no launcher is above the rank (`python -m hvd_dqn.train` alone, Ray's actors,
Slurm's srun steps) nothing is watched: a rank there never outlives what started it unnoticed.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, List, Optional, Tuple

WATCH_SECONDS = 1.0  # how often the launcher processes are looked at

_LAUNCHER_NAMES = {"horovodrun", "mpirun", "mpiexec", "orterun", "prterun", "orted", "prted"}
_TRAIN_SCRIPT = os.path.join("scripts", "train.sh")


def is_launcher(cmdline: List[str]) -> bool:
    """Whether a process with this command line is part of a job's launch: a launcher (horovodrun run by
    Python, mpirun and Open MPI's daemons), the shell horovodrun becomes (`sh -c "mpirun ..."`) or runs each
    Gloo rank in (`sh -c "env HOROVOD_RANK=..."`), the helper process horovodrun forks for each Gloo rank, or
    the project's `scripts/train.sh` above them."""
    if not cmdline:
        return False
    names = [os.path.basename(part) for part in cmdline[:2]]
    if any(name in _LAUNCHER_NAMES for name in names):
        return True
    if names[0] in ("sh", "bash", "dash") and len(cmdline) >= 3 and cmdline[1] == "-c":
        command = cmdline[2]
        return command.lstrip().startswith(("mpirun", "mpiexec")) or "HOROVOD_RANK=" in command
    if names[0] in ("sh", "bash") and len(cmdline) >= 2 and cmdline[1].endswith(_TRAIN_SCRIPT):
        return True  # scripts/train.sh, which starts horovodrun under setsid and stops the ranks itself
    return "multiprocessing.spawn" in " ".join(cmdline[:3]) and "--multiprocessing-fork" in cmdline


def launcher_chain(pid: Optional[int] = None) -> List[Tuple[int, float, str]]:
    """(pid, start time, name) of the launcher processes directly above process `pid` (default: this one),
    nearest first, up to the first ancestor that is not part of the launch."""
    import psutil  # Horovod's own dependency

    chain = []
    try:
        process = psutil.Process(pid).parent()
        while process is not None and process.pid > 1 and is_launcher(process.cmdline()):
            chain.append((process.pid, process.create_time(), " ".join(process.cmdline())[:80]))
            process = process.parent()
    except psutil.Error:  # a process that ended while the chain was read: watch what was found
        pass
    return chain


def gone(chain: List[Tuple[int, float, str]]) -> Optional[Tuple[int, float, str]]:
    """The first process of `chain` that has ended (or whose pid now names another process), or None."""
    import psutil

    for entry in chain:
        pid, started, _ = entry
        try:
            process = psutil.Process(pid)
            if process.create_time() != started or process.status() == psutil.STATUS_ZOMBIE:
                return entry
        except psutil.Error:
            return entry
    return None


class LauncherWatch:
    """A daemon thread that calls `on_gone(description)` once, when a launcher above this rank has ended."""

    def __init__(self, on_gone: Callable[[str], None], chain=None, seconds: float = WATCH_SECONDS):
        self.chain = launcher_chain() if chain is None else chain
        self._on_gone = on_gone
        self._seconds = seconds
        self._stop = threading.Event()
        self._thread = None

    def start(self) -> "LauncherWatch":
        if self.chain and self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="launcher-watch", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self._seconds):
            ended = gone(self.chain)
            if ended is not None:
                pid, _, name = ended
                self._on_gone(f"word that its launcher ended ({' '.join(name.split()[:3])}, pid {pid})")
                return
