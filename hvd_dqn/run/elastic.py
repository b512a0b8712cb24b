"""Fault-tolerant training under Horovod Elastic (`--elastic`).

Started as

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script scripts/discover_hosts.sh \
        python -m hvd_dqn.train --flagfile=... --elastic

the training loop runs inside `hvd.elastic.run`. Every `--elastic_commit_env_steps` the ranks commit the
training state to host memory. When a worker dies, the survivors' next collective fails; Horovod rolls
them back to the last commit (`TrainingState.restore`), re-forms the ring without the lost worker, and the
loop goes on. When the discovery script reports new hosts, the next commit raises `HostsUpdatedInterrupt`
on every rank; the ring is re-formed with the newcomers, who receive rank 0's state (`TrainingState.sync`)
and build their own emulators and replay memory.

What is rolled back is what must be equal on every rank: the online and target networks, the optimizer,
the job's counters (env steps, episodes, updates, the evaluation streak) and the agent's rank state (DQN's env steps since its last update). What a rank
owns itself is kept: its emulators, its replay memory (transitions gathered after the commit are real
experience), its RNG and its episode statistics.
"""
from __future__ import annotations

import dataclasses
import functools
import os

import horovod.tensorflow as hvd
import tensorflow as tf
from absl import logging
from horovod.common.elastic import State

from hvd_dqn import collectives
from hvd_dqn.config import ConfigError
from hvd_dqn.run import horovod_setup
from hvd_dqn.run.progress import Counters


class TrainingState(State):
    """The Horovod Elastic state of one rank's Trainer.

    Horovod's own `TensorFlowKerasState` covers one model and its optimizer, and `TensorFlowState`
    re-broadcasts its variables on `sync()` only in TF1 graph mode; a DQN learner has two networks, an
    optimizer and counters that must move together, so this state holds them all.
    """

    def __init__(self, trainer):
        super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank)
        self.trainer = trainer
        self.started = False  # whether the job has done its one-time start (fresh or resumed)
        self._saved_values = None
        self._saved_progress = None
        self.save()

    def progress(self) -> dict:
        trainer = self.trainer
        return dict(counters=dataclasses.asdict(trainer.counters), rank_state=trainer.agent.rank_state(),
                    last_checkpoint_env_steps=trainer.last_checkpoint_env_steps, started=self.started)

    def _set_progress(self, progress: dict) -> None:
        trainer = self.trainer
        trainer.counters = Counters(**progress["counters"])
        trainer.agent.load_rank_state(progress["rank_state"])
        trainer.last_checkpoint_env_steps = progress["last_checkpoint_env_steps"]
        self.started = progress["started"]

    # The three operations Horovod Elastic calls.
    def save(self) -> None:
        """Commit: copies of the variables and counters in host memory."""
        self._saved_values = [variable.numpy() for variable in self.trainer.agent.synchronized_variables]
        self._saved_progress = self.progress()

    def restore(self) -> None:
        """After a lost worker: back to the last commit."""
        for variable, value in zip(self.trainer.agent.synchronized_variables, self._saved_values):
            variable.assign(value)
        self._set_progress(self._saved_progress)

    def sync(self) -> None:
        """Collective, after every (re-)formation of the ring: every rank takes rank 0's state."""
        collectives.broadcast_from_chief(self.trainer.agent.synchronized_variables)
        self._set_progress(collectives.broadcast_object(self.progress(), "elastic_progress"))
        self.save()


def check_elastic_launch(world) -> None:
    """Refuses a launch Horovod Elastic cannot serve; warns where it would not be fault-tolerant."""
    if world.controller != "Gloo":
        raise ConfigError("--elastic: Horovod Elastic runs over Gloo, but this job was started over MPI; start it "
                          "with horovodrun --gloo -np N --min-np M --max-np K --host-discovery-script "
                          "scripts/discover_hosts.sh (see docs/resume.md, 'Elastic training')")
    if os.environ.get("HOROVOD_ELASTIC") != "1" and world.is_chief:
        logging.warning("--elastic: this job was not started by an elastic horovodrun (--min-np, --max-np, "
                        "--host-discovery-script), so a lost worker still ends it; training goes on as usual")


def run_elastic(trainer):
    """Collective: the trainer's whole run under `hvd.elastic.run`; returns its final counters."""
    check_elastic_launch(trainer.world)
    state = TrainingState(trainer)
    state.register_reset_callbacks([functools.partial(on_world_change, trainer)])

    def commit() -> None:
        state.commit()
        if trainer.world.is_chief:
            logging.info("elastic commit at %s env steps", f"{trainer.counters.env_steps:,}")

    trainer.commit = commit

    @hvd.elastic.run
    def run(state: TrainingState):
        try:
            if not state.started:
                trainer.start()  # resume or broadcast: once per job, not again after a change of world
                state.started = True
                commit()
            return trainer.train()
        except tf.errors.UnknownError as error:
            # hvd.elastic.run turns errors of Horovod's collectives into a rollback, but swallows any other
            # UnknownError and returns None; those are real faults and must end the job.
            if not any(op in error.message for op in ("HorovodAllreduce", "HorovodAllgather", "HorovodBroadcast")):
                raise RuntimeError(f"TensorFlow failed outside Horovod's collectives: {error.message}") from error
            raise

    return run(state)


def on_world_change(trainer) -> None:
    """Horovod Elastic reset callback: a worker was lost or joined and Horovod was re-initialised.
    Ranks are renumbered, so this rank re-reads its place, re-splits what is split over ranks and
    rescales the learning rate; rank 0 (perhaps a new one) takes over the metrics files. Rolled-back
    counters and rank 0's weights arrive afterwards through the elastic state's sync."""
    old_size = trainer.world.size
    trainer.world = horovod_setup.current_world()
    trainer.join_world()  # also: no rank updates until all have --learning_starts again
    world = trainer.world
    # Only a step size scaled to the ranks follows the world (rank_split.learning_rate_at); a decay-only schedule,
    # and PQN's, whose minibatch share is each rank's own under --elastic, keep their scale of 1.
    rescaled = trainer.agent.on_world_change(world.size)
    # Only rank 0 reports progress (main() quiets the others); a rank promoted to rank 0 takes over.
    logging.set_verbosity(logging.INFO if world.is_chief else logging.WARNING)
    if world.is_chief:
        logging.warning("world changed from %d to %d ranks%s; going on from the last commit (%s env steps, "
                        "%s updates)", old_size, world.size, "; learning rate rescaled" if rescaled else "",
                        f"{trainer.counters.env_steps:,}", f"{trainer.counters.updates:,}")
