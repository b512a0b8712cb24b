"""The job's progress (identical on every rank) and the stop signals the loop polls for.

Kept apart from the trainer so that what saves and restores progress (checkpoints, `hvd_dqn.run.elastic`)
can import it without importing the trainer.
"""
from __future__ import annotations

import dataclasses
import signal
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

    @classmethod
    def from_saved(cls, saved: dict) -> "Counters":
        """The counters of a checkpoint's counters.json (fields it lacks start at their defaults)."""
        return cls(**{field.name: [float(value) for value in saved.get(field.name, [])]
                      if field.name == "recent_returns" else int(saved.get(field.name, 0))
                      for field in dataclasses.fields(cls)})


class StopSignals:
    """SIGTERM (pre-emption: Slurm, Kubernetes, horovodrun passing on its own signal) and SIGINT (Ctrl-C)
    only set a flag here; the loop polls it collectively (`Trainer._stop_requested`), so every rank stops
    after the same iteration, writes the final checkpoint together and exits cleanly. A second signal of
    the same kind gets the default behaviour (an immediate stop)."""

    def __init__(self):
        self.received: Optional[str] = None

    def install(self) -> None:
        if self.received:  # entered again (elastic): a signal already received keeps its effect
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        signal.signal(signum, signal.SIG_DFL)
