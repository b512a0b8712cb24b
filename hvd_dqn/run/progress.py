"""The job's progress (identical on every rank) and the stop signals the loop polls for.

Kept apart from the trainer so that what saves and restores progress (checkpoints, `hvd_dqn.run.elastic`)
can import it without importing the trainer.
"""
from __future__ import annotations

import dataclasses
import signal
import time
from typing import List, Optional

# The ranks agree on stopping every this many env steps per rank (one tiny allreduce): short enough to stop
# within horovodrun's 5-second grace period on Atari, rare enough to cost nothing on CartPole.
STOP_POLL_ENV_STEPS_PER_RANK = 32


@dataclasses.dataclass
class Counters:
    """Progress of the whole job; identical on every rank."""

    env_steps: int = 0  # summed over ranks
    episodes: int = 0  # summed over ranks
    updates: int = 0
    evaluations_at_target: int = 0  # the latest evaluations in a row that reached --stop_at_eval_return
    # With --stop_at_train_return: the returns of the job's latest --stop_train_episodes training episodes,
    # oldest first, so that a resumed or elastic run keeps counting the same window.
    recent_returns: List[float] = dataclasses.field(default_factory=list)
    # Seconds of training when the checkpoint was written (rank 0's `TrainingClock`), so that a resumed run's
    # clock goes on from there. Under --elastic it is rolled back with the rest, but the clock is not.
    wall_s: float = 0.0

    @classmethod
    def from_saved(cls, saved: dict) -> "Counters":
        """The counters of a checkpoint's counters.json (fields it lacks start at their defaults)."""
        def value(field):
            if field.name == "recent_returns":
                return [float(item) for item in saved.get(field.name, [])]
            return float(saved.get(field.name, 0.0)) if field.name == "wall_s" else int(saved.get(field.name, 0))

        return cls(**{field.name: value(field) for field in dataclasses.fields(cls)})


class TrainingClock:
    """Seconds of training since the run began, summed over the parts of a resumed run: the time base of
    episodes.csv's `wall_s` and metrics.csv's `wall_time_s`, in which time to a score is measured. It runs
    from the first entry into the training loop (after start-up: imports, Horovod, building the networks,
    restoring a checkpoint) to the end of the loop; a failure and rollback under --elastic costs real time and
    is counted."""

    def __init__(self, seconds_before: float = 0.0):
        self._seconds_before = seconds_before
        self._running_since: Optional[float] = None

    def start(self) -> None:
        if self._running_since is None:
            self._running_since = time.monotonic()

    def stop(self) -> None:
        if self._running_since is not None:
            self._seconds_before = self.seconds()
            self._running_since = None

    def seconds(self) -> float:
        running = time.monotonic() - self._running_since if self._running_since is not None else 0.0
        return self._seconds_before + running


class StopSignals:
    """SIGTERM (pre-emption: Slurm, Kubernetes, horovodrun passing on its own signal), SIGINT (Ctrl-C), SIGHUP (a
    closed terminal; not where it is ignored, as under nohup), the end of the rank's launcher
    (`hvd_dqn.run.launcher_watch`) and a signal to the Ray driver (`hvd_dqn.ray_train`) only set a flag here; the
    loop polls it collectively (`hvd_dqn.run.stopping`), so every rank stops after the same iteration, writes the
    final checkpoint together and exits cleanly. A second signal of the same kind gets the default behaviour (an
    immediate stop)."""

    def __init__(self):
        self.received: Optional[str] = None
        self._watch = None

    def install(self) -> None:
        if self.received:  # entered again (elastic): a signal already received keeps its effect
            return
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue  # nohup: the user asked for the job to outlive the terminal
            signal.signal(signum, self._handle)
        if self._watch is None:
            from hvd_dqn.run.launcher_watch import LauncherWatch

            self._watch = LauncherWatch(self.request).start()

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        signal.signal(signum, signal.SIG_DFL)

    def request(self, description: str) -> None:
        """A stop asked for by something other than a signal to this process (its launcher's end, the Ray
        driver's word); `description` completes "stopped by ..." in the log."""
        self.received = self.received or description
