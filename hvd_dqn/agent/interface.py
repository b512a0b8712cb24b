"""What the trainer asks of an agent: the one line between the algorithm and the machinery that runs it.

The trainer (`hvd_dqn.run.trainer`) steps a rank's envs, hands each step to its agent, asks it to learn, and
checkpoints, broadcasts and rolls back what the agent names; it never asks which algorithm it runs. An agent
(`hvd_dqn.agent.dqn.agent.DQNAgent`, `hvd_dqn.agent.pqn.agent.PQNAgent`, built by
`hvd_dqn.agent.factory.make_agent`) owns everything algorithmic: what it learns from (a replay memory, a
rollout), when it updates, its targets and networks, and its distributed update
(`hvd_dqn.agent.distributed_update`).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Protocol, Tuple

import numpy as np


@dataclasses.dataclass
class Experience:
    """One step of every env of a rank: s_t, the actions a_t taken there, and what the vector env returned
    (next observations, rewards, terminated, truncated, info), as `env.step` gives them."""

    observation: np.ndarray
    action: np.ndarray
    step_result: tuple


class Agent(Protocol):
    """One rank's agent. Collective calls are marked: every rank makes them at the same point of the loop."""

    # The network the learner trains; evaluation acts with it, and so does acting in order.
    online: object
    # The optimizer (a Horovod DistributedOptimizer, or a LossScaleOptimizer with --mixed_precision).
    optimizer: object
    # What this rank learns from: its replay memory or its rollout. With --checkpoint_replay it is saved as the
    # rank's shard (`save`, `load`, `digest`, `cut_episodes`, `__len__`, `capacity`, `bytes_per_transition`).
    memory: object
    # The agent's own random stream (minibatch draws, shuffles), apart from acting's; checkpointed per rank.
    sample_rng: np.random.Generator
    # Iterations (one step of every env of the rank) from one completed round of learning to the next: 1 where
    # an agent may learn after any step, --rollout_steps for PQN. A stop poll between them would find nothing new.
    iterations_per_cycle: int

    def make_actor(self, rng: np.random.Generator, own_network: bool):
        """The epsilon-greedy actor that steps this rank's envs; with `own_network` (acting ahead on a thread of
        its own) it acts with a network of its own, which the learner's weights reach at fixed points."""

    def join_world(self, world_size: int) -> None:
        """What depends on the world's size: each rank's share of the updates and the learning start. At
        start-up and, under --elastic, after every change of world."""

    def store(self, experience: Experience) -> Tuple[np.ndarray, np.ndarray]:
        """Stores one step of every env; returns (raw rewards, done) for the episode statistics."""

    def learn(self, env_steps: int, counters) -> None:
        """Collective: the updates now due, if any; `env_steps` is the job's after the step just stored and
        `counters.updates` counts the updates made."""

    def iterations_per_update(self, num_envs: int) -> float:
        """Iterations of a rank of `num_envs` envs per update (how far acting ahead may run through two)."""

    @property
    def synchronized_variables(self) -> List:
        """Everything that must be equal on all ranks, in a fixed order (broadcast from rank 0, rolled back)."""

    def checkpoint_items(self) -> Dict[str, object]:
        """The trackables a checkpoint stores for the job (rank 0's)."""

    def rank_state(self) -> Dict[str, int]:
        """What this rank keeps of its own beside its memory, saved in the checkpoint and the elastic commit."""

    def load_rank_state(self, state: Optional[Dict[str, int]]) -> None:
        """Takes back `rank_state()`; None: as at a fresh start."""

    def current_learning_rate(self) -> float:
        """The step size of the next update."""

    def on_world_change(self, world_size: int) -> bool:
        """--elastic: follows a new world's size with the step size; returns whether it changed."""

    def close(self) -> None:
        """Stops the agent's helper threads."""
