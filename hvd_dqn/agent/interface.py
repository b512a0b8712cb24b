"""What the trainer asks of an agent: the one line between the algorithm and the machinery that runs it.

The trainer (`hvd_dqn.run.trainer`) steps a rank's envs, hands each step to its agent, asks it to learn, and
checkpoints, broadcasts and rolls back what the agent names; it never asks which algorithm it runs. An agent
(`hvd_dqn.agent.dqn.agent.DQNAgent`, `hvd_dqn.agent.qrdqn.agent.QRDQNAgent`, `hvd_dqn.agent.pqn.agent.PQNAgent`,
each registered in `hvd_dqn.agent.registry` and built by `hvd_dqn.agent.factory.make_agent`) owns everything
algorithmic: what it learns from (a replay memory, a rollout), when it updates, its targets and networks, its
greedy policy, and its distributed update (`hvd_dqn.agent.data_parallel_update`). Its class (`AgentClass`) answers
what is asked before an agent exists: its network for a checkpoint to load into, the Q-values it acts greedily on,
and its memory's size for the pre-flight.
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


@dataclasses.dataclass(frozen=True)
class MemorySetting:
    """How the memory pre-flight names one rank's memory: the flag that sizes it (`--name=value`), the memory in
    the singular and the plural, and the changes that shrink it, best first."""
    flag: str
    name: str
    plural: str
    remedies: List[str]


@dataclasses.dataclass(frozen=True)
class ServedDistribution:
    """The return's distribution as an export serves it: `model` maps observations to `output` (B, actions,
    points) of float32, sharing the network's weights with its noise off; `points` names what each of the last
    axis's entries stands for (the atoms' returns, the quantiles' levels); `settings` the agent's settings that
    shape it. An agent class that learns a distribution answers `served_distribution(config, network)` with it."""
    model: object
    output: str  # "quantiles" (returns at the levels in points) or "probabilities" (of the atoms in points)
    description: str
    points: Dict[str, List[float]]
    settings: Dict[str, object]


class AgentClass(Protocol):
    """What an agent's class (its registry entry's `implementation`) answers before any agent is built."""

    @classmethod
    def build(cls, config, spec, num_envs: int, replay_capacity: int, world_size: int,
              sample_rng: np.random.Generator, rank_metrics) -> "Agent":
        """One rank's agent for `num_envs` envs of `spec` (`hvd_dqn.envs.EnvSpec`); `replay_capacity` is the
        rank's share of the replay memory (0 for an agent without one)."""

    @staticmethod
    def network(config, spec, name: str):
        """A new Keras network of the kind the learner trains (a checkpoint's "online" loads into it)."""

    @staticmethod
    def q_values(network):
        """A Keras model sharing `network`'s weights that maps observations to one Q-value per action (B,
        actions): what greedy acting, evaluation and export use."""

    # Optional, for an agent that learns the return's distribution (the export's `distribution` signature):
    # @staticmethod
    # def served_distribution(config, network) -> ServedDistribution: ...

    @staticmethod
    def memory_bytes(config, spec, num_envs: int, capacity: int) -> int:
        """Bytes one rank's memory of `num_envs` envs (a replay memory of `capacity` transitions) will hold."""

    @staticmethod
    def memory_setting(config, ranks_on_host: int) -> MemorySetting:
        """The rank's memory as the pre-flight names it on a host of `ranks_on_host` ranks."""


class Agent(Protocol):
    """One rank's agent. Collective calls are marked: every rank makes them at the same point of the loop."""

    # The network the learner trains; acting in order reads it.
    online: object
    # The online network's Q-values per action (the class's `q_values(online)`): evaluation acts greedily on it.
    q_network: object
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

    def epsilon_schedule(self):
        """Training's epsilon over the job's env steps (`hvd_dqn.agent.schedules.LinearSchedule`): the config's
        for an epsilon-greedy agent (`AgentBase` gives it), 0 throughout where something else explores (noisy
        networks)."""

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
