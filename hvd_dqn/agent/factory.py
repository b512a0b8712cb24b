"""The agent a TrainConfig names (--agent), built for one rank, and what the rest of the package asks of an agent
before it is built: each answer comes from the agent's registry entry (`hvd_dqn.agent.registry`) or its class
(`hvd_dqn.agent.interface.AgentClass`), never from its name."""
from __future__ import annotations

import numpy as np

from hvd_dqn.agent import registry
from hvd_dqn.agent.interface import Agent, MemorySetting
from hvd_dqn.config import TrainConfig


def agent_class(config: TrainConfig):
    """The class of the agent --agent names (`hvd_dqn.agent.interface.AgentClass`)."""
    return registry.implementation(config.agent)


def agent_entry(config: TrainConfig) -> registry.AgentEntry:
    """The registry entry of the agent --agent names: how reports name it (`title`) and what it learns from."""
    return registry.entry(config.agent)


def make_agent(config: TrainConfig, spec, num_envs: int, replay_capacity: int, world_size: int,
               sample_rng: np.random.Generator, rank_metrics) -> Agent:
    """One rank's agent for envs of `spec` (`hvd_dqn.envs.EnvSpec`): `num_envs` and `replay_capacity` are the
    rank's share (`hvd_dqn.rank_split.rank_share`), `sample_rng` the agent's own random stream, `rank_metrics`
    where its updates' losses go (`hvd_dqn.run.metrics.RankMetrics`)."""
    return agent_class(config).build(config, spec, num_envs, replay_capacity, world_size, sample_rng, rank_metrics)


def acts_ahead(config: TrainConfig, steps_outside_python: bool) -> bool:
    """Whether acting runs ahead of learning on a thread of its own (--pipeline; on with "auto" where the emulators
    step outside Python's interpreter lock). Never for an agent whose entry says it acts in order (PQN, whose
    rollouts are collected with the weights they are learned from)."""
    if not agent_entry(config).acts_ahead:
        return False
    return config.pipeline == "on" or (config.pipeline == "auto" and steps_outside_python)


def memory_bytes(config: TrainConfig, spec, num_envs: int, capacity: int) -> int:
    """Bytes of what one rank's agent learns from, once allocated: its replay memory of `capacity` transitions
    over `num_envs` envs, or its rollout."""
    return agent_class(config).memory_bytes(config, spec, num_envs, capacity)


def memory_setting(config: TrainConfig, ranks_on_host: int) -> MemorySetting:
    """The agent's memory as the pre-flight names it, for a host of `ranks_on_host` ranks."""
    return agent_class(config).memory_setting(config, ranks_on_host)


def greedy_network(config: TrainConfig, network):
    """The Keras model that maps observations to one Q-value per action, sharing `network`'s weights: what
    greedy acting, evaluation and export use (the network itself for DQN and PQN; the mean of the quantiles for
    QR-DQN)."""
    return agent_class(config).q_values(network)


def served_distribution(config: TrainConfig, network):
    """The return's distribution an export serves beside the greedy policy (`interface.ServedDistribution`), for an
    agent whose class learns one; None for the others (DQN, PQN, an agent that does not say)."""
    serve = getattr(agent_class(config), "served_distribution", None)
    return serve(config, network) if serve is not None else None


def online_network(config: TrainConfig, spec, name: str = "online"):
    """A new network of the kind the agent's learner trains (a checkpoint's "online"), for envs of `spec`."""
    return agent_class(config).network(config, spec, name)


def replay_memory(config: TrainConfig, spec, num_envs: int, capacity: int):
    """A replay memory of `capacity` transitions over `num_envs` envs as the agent's rank keeps it (the DQN family's
    class's `replay_memory`), for the measuring commands; ValueError for an agent that keeps none."""
    cls = agent_class(config)
    if not hasattr(cls, "replay_memory"):
        raise ValueError(f"--agent={agent_entry(config).name} keeps no replay memory")
    return cls.replay_memory(config, spec, num_envs, capacity)


def draws_ahead(config: TrainConfig, update_on_gpu: bool) -> bool:
    """Whether the agent draws each next minibatch while the update before it runs (--draw_ahead): its class's
    answer; never for an agent that draws no minibatches from a memory (PQN)."""
    answer = getattr(agent_class(config), "draws_ahead_with", None)
    return bool(answer(config, update_on_gpu)) if answer is not None else False


def rollout_learner(config: TrainConfig, online, world_size: int = 1, distributed: bool = True):
    """The learner of an agent that learns from rollouts (PQN's `learner_class`) on `online`, as the measuring
    commands build it; distributed=False: the same update on Keras' own optimizer."""
    return agent_class(config).learner_class.from_config(config, online, world_size, distributed=distributed)


def replay_learner(config: TrainConfig, spec, world_size: int = 1, distributed: bool = True, online=None):
    """The learner of an agent that learns from a replay memory (the DQN family's `learner_class`) on new online
    (or `online`) and target networks of the agent's kind, as the measuring commands build it; distributed=False:
    the same update on Keras' own optimizer, without Horovod's allreduce."""
    cls = agent_class(config)
    online = online if online is not None else cls.network(config, spec, "online")
    return cls.learner_class.from_config(config, online, cls.network(config, spec, "target"), world_size, distributed)
