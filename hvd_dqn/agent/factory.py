"""The agent a TrainConfig names (--agent), built for one rank: the one place that reads which algorithm runs."""
from __future__ import annotations

import dataclasses
from typing import List

import numpy as np

from hvd_dqn.agent.interface import Agent
from hvd_dqn.config import TrainConfig


def make_agent(config: TrainConfig, spec, num_envs: int, replay_capacity: int, world_size: int,
               sample_rng: np.random.Generator, rank_metrics) -> Agent:
    """One rank's agent for envs of `spec` (`hvd_dqn.envs.EnvSpec`): `num_envs` and `replay_capacity` are the
    rank's share (`hvd_dqn.rank_split.rank_share`), `sample_rng` the agent's own random stream, `rank_metrics`
    where its updates' losses go (`hvd_dqn.run.metrics.RankMetrics`)."""
    if config.agent == "pqn":
        from hvd_dqn.agent.pqn.agent import PQNAgent

        return PQNAgent.build(config, spec, num_envs, world_size, sample_rng, rank_metrics)
    from hvd_dqn.agent.dqn.agent import DQNAgent

    return DQNAgent.build(config, spec, num_envs, replay_capacity, world_size, sample_rng, rank_metrics)


def acts_ahead(config: TrainConfig, steps_outside_python: bool) -> bool:
    """Whether acting runs ahead of learning on a thread of its own (--pipeline; on with "auto" where the emulators
    step outside Python's interpreter lock). Never for PQN, whose rollouts are collected with the weights they are
    learned from."""
    if config.agent == "pqn":
        return False
    return config.pipeline == "on" or (config.pipeline == "auto" and steps_outside_python)


def memory_bytes(config: TrainConfig, spec, num_envs: int, capacity: int) -> int:
    """Bytes of what one rank's agent learns from, once allocated: its replay memory of `capacity` transitions
    over `num_envs` envs, or its rollout."""
    if config.agent == "pqn":
        from hvd_dqn.agent.pqn.agent import rollout_bytes

        return rollout_bytes(config, spec, num_envs)
    from hvd_dqn.agent.dqn.agent import replay_memory_bytes

    return replay_memory_bytes(config, spec, num_envs, capacity)


@dataclasses.dataclass(frozen=True)
class MemorySetting:
    """How the memory pre-flight names one rank's memory: the flag that sizes it (`--name=value`), the memory in
    the singular and the plural, and the changes that shrink it, best first."""
    flag: str
    name: str
    plural: str
    remedies: List[str]


def memory_setting(config: TrainConfig, ranks_on_host: int) -> MemorySetting:
    """The agent's memory as the pre-flight names it, for a host of `ranks_on_host` ranks."""
    if config.agent == "pqn":
        return MemorySetting(f"--rollout_steps={config.rollout_steps}", "rollout", "the rollouts",
                             ["fewer ranks per host", "fewer --num_envs", "fewer --rollout_steps"])
    remedies = ["fewer ranks per host"] if ranks_on_host > 1 else []
    if config.counts_per_rank and ranks_on_host > 1:
        remedies.append("--nocounts_per_rank (which splits --replay_capacity over the ranks)")
    remedies.append("a smaller --replay_capacity")
    return MemorySetting(f"--replay_capacity={config.replay_capacity}", "replay", "the replay memories", remedies)


def learns_from_replay(config: TrainConfig) -> bool:
    """Whether the agent keeps a replay memory and a target network (DQN), which the measuring commands of
    replay and target-network costs need."""
    return config.agent != "pqn"
