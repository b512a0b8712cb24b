"""Acting and learning at once: a producer-consumer pipeline between a rank's acting and its agent's learning.

Acting runs on a thread of its own (inference on its own copy of the Q-network, the emulators,
epsilon-greedy) and hands each step of its envs, as `Experience`, to a queue; the trainer's thread takes
the steps in order; the agent stores them and makes the updates then due. The replay
ratio is the flags' exactly: acting never runs more than `lead` iterations (one step of every env of the
rank) ahead of learning, and learning never takes a step acting has not made.

Reproducible by construction, whatever the threads' timing:
- iteration i acts with the weights the learner published last at or before it finished iteration
  i - 1 - lead; it publishes them (one copy, on its own thread) after each iteration in which its update count
  has moved on by `sync_updates` or more since the last copy. With lead 0 and sync_updates 1 iteration i acts
  with the weights after iteration i - 1's updates: exactly the in-order loop. With lead 1 and sync_updates
  1 the emulators step while the learner makes the previous iteration's updates, with actions from weights one
  iteration older: the benchmark's per-step overlap (once a code path of its own, bitwise this one).
- the replay memory is written by the trainer's thread only, in iteration order, so every update samples from
  the memory the in-order loop would have; the two sides' random streams are their own.
- acting stops at `allow_until`'s iteration, where the trainer evaluates, logs, checkpoints or commits: those
  phases see (and save) both sides at the same iteration, as in the in-order loop.
The acting thread issues no collective: every rank's updates stay on its trainer thread, in the same order.
"""
from __future__ import annotations

import collections
import math
import threading
from typing import Deque, List, Optional

import tensorflow as tf

from hvd_dqn.agent.interface import Experience
from hvd_dqn.run.acting import Acting


def lead_iterations(lead_env_steps: int, env_steps_per_iteration: int, iterations_per_update: float) -> int:
    """How many iterations acting may run ahead: --pipeline_lead_env_steps (the job's env steps, rounded up: 1 is
    one step of every env, the benchmark's per-step overlap), or with -1 enough to act on through two updates
    (acting goes on while the learner makes them)."""
    if lead_env_steps >= 0:
        return -(-lead_env_steps // env_steps_per_iteration)
    return max(1, math.ceil(2 * iterations_per_update))


class PipelineError(Exception):
    """The acting thread failed (an emulator crashed); raised on the trainer's thread with its cause."""


class ActingPipeline:
    """One rank's acting thread and its queue. Iterations count from 1 at `start`, the job's env steps then
    being `start_env_steps`; each iteration is `env_steps_per_iteration` of the job's env steps."""

    def __init__(self, acting: Acting, online: tf.keras.Model, acting_network: tf.keras.Model, lead: int,
                 sync_updates: int, start_env_steps: int, env_steps_per_iteration: int, updates: int):
        if lead < 0 or sync_updates < 1:
            raise ValueError(f"lead must be >= 0 and sync_updates >= 1 (got {lead}, {sync_updates})")
        self.acting = acting
        self.lead = lead
        self.sync_updates = sync_updates
        self.start_env_steps = start_env_steps
        self.env_steps_per_iteration = env_steps_per_iteration
        self._condition = threading.Condition()
        self._queue: Deque[Experience] = collections.deque()
        self._produced = 0  # the last iteration acted
        self._consumed = 0  # the last iteration the trainer's thread finished (stored, learned from)
        self._allowed = 0  # acting may not go beyond this iteration (the next phase of the trainer)
        self._closing = False
        self._error: Optional[BaseException] = None
        # Weights travel as tensors copied inside TensorFlow (0.7 ms for the Nature CNN's 1.7M weights, against
        # 2.3 ms through Keras' get_weights/set_weights and NumPy): a snapshot is immutable, since an update
        # writing a variable whose value is still referenced copies it first.
        self._snapshot = tf.function(lambda: [tf.identity(variable) for variable in online.variables])
        self._load = tf.function(lambda weights: [variable.assign(value) for variable, value
                                                  in zip(acting_network.variables, weights)])
        # (iteration after which they were published, weights) in publishing order; the acting thread drops
        # those it can no longer need.
        self._published = collections.deque([(0, self._snapshot())])
        self._published_at_updates = updates
        self._applied_tag = None
        self._thread = threading.Thread(target=self._act_ahead, name="acting", daemon=True)
        self._thread.start()

    # --- the trainer's thread's calls ----------------------------------------------------------------------
    @property
    def consumed(self) -> int:
        return self._consumed

    def allow_until(self, iteration: int) -> None:
        """Lets acting go on up to `iteration` (it stops there until allowed further)."""
        with self._condition:
            self._allowed = iteration
            self._condition.notify_all()

    def stop_soon(self) -> int:
        """A stop was agreed at the last finished iteration: acting may already have run up to `lead` + 1
        iterations beyond it, and those steps are stored and learned from, so the run ends at the same iteration on
        every rank without losing them. Returns that iteration."""
        with self._condition:
            self._allowed = min(self._allowed, self._consumed + 1 + self.lead)
            self._condition.notify_all()
            return self._allowed

    @property
    def allowed(self) -> int:
        return self._allowed

    def next_experience(self) -> Experience:
        """The step of the next iteration, once acting has made it."""
        with self._condition:
            if self._consumed + 1 > self._allowed:
                raise RuntimeError(f"iteration {self._consumed + 1} is beyond what acting may do ({self._allowed})")
            while not self._queue and self._error is None:
                self._condition.wait()
            if not self._queue:  # the steps made before a failure are taken first
                raise PipelineError(f"acting failed: {self._error}") from self._error
            return self._queue.popleft()

    def finished(self, updates: int) -> None:
        """The trainer's thread stored the iteration and made its updates (its update count is now `updates`).
        New weights are copied out first, so acting sees them from exactly the iteration their rule names."""
        snapshot = None
        if updates - self._published_at_updates >= self.sync_updates:
            snapshot = self._snapshot()
            self._published_at_updates = updates
        with self._condition:
            self._consumed += 1
            if snapshot is not None:
                self._published.append((self._consumed, snapshot))
            self._condition.notify_all()

    def close(self) -> List[Experience]:
        """Stops the acting thread (after the step it is taking) and returns the steps it made that the
        trainer's thread has not taken, oldest first; their envs have moved on, so the caller stores them."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        self._thread.join()
        with self._condition:
            left = list(self._queue)
            self._queue.clear()
        return left

    # --- the acting thread -----------------------------------------------------------------------------------
    def _act_ahead(self) -> None:
        try:
            while True:
                with self._condition:
                    iteration = self._produced + 1
                    while not self._closing and (iteration > self._consumed + 1 + self.lead
                                                 or iteration > self._allowed):
                        self._condition.wait()
                    if self._closing:
                        return
                    tag, weights = self._weights_for(iteration)
                if tag != self._applied_tag:
                    self._load(weights)
                    self._applied_tag = tag
                env_steps = self.start_env_steps + (iteration - 1) * self.env_steps_per_iteration
                experience = self.acting.act(env_steps, copy=True)
                with self._condition:
                    self._queue.append(experience)
                    self._produced = iteration
                    self._condition.notify_all()
        except BaseException as error:  # handed to the trainer's thread, which raises it where it waits
            with self._condition:
                self._error = error
                self._condition.notify_all()

    def _weights_for(self, iteration: int):
        """(tag, weights): the newest published at or before iteration - 1 - lead; older ones are dropped."""
        newest_usable = iteration - 1 - self.lead
        while len(self._published) > 1 and self._published[1][0] <= newest_usable:
            self._published.popleft()
        return self._published[0]
