"""What the agents share (`hvd_dqn.agent.interface.Agent`): a learner with its networks and optimizer, the memory it
learns from, and how a step of the envs is stored there (`store_step`; `act_and_store` acts first, for the
benchmarks that time a rank's acting path)."""
from __future__ import annotations

import functools
from typing import Dict

import numpy as np

from hvd_dqn.agent.interface import Experience
from hvd_dqn.agent.optimizers import current_learning_rate
from hvd_dqn.agent.schedules import LinearSchedule
from hvd_dqn.envs import learning_discounts, true_next_observations


class AgentBase:
    """An agent of one learner (`learner.online`, `learner.optimizer`, its synchronized variables and checkpoint
    items) and one memory, with its own random stream. `rank_metrics` records each update's loss and Q values
    (`hvd_dqn.run.metrics.RankMetrics`); `spec` is the envs' (`hvd_dqn.envs.EnvSpec`), for the actor."""

    def __init__(self, config, learner, memory, spec, sample_rng: np.random.Generator, rank_metrics):
        self.config = config
        self.learner = learner
        self.memory = memory
        self.spec = spec
        self.sample_rng = sample_rng
        self.rank_metrics = rank_metrics

    @property
    def online(self):
        return self.learner.online

    @functools.cached_property
    def q_network(self):
        """The online network's Q-values per action (the class's `q_values`), built once."""
        return self.q_values(self.learner.online)

    @property
    def optimizer(self):
        return self.learner.optimizer

    @property
    def synchronized_variables(self):
        return self.learner.synchronized_variables

    def checkpoint_items(self) -> Dict[str, object]:
        return self.learner.checkpoint_items()

    def current_learning_rate(self) -> float:
        return current_learning_rate(self.learner.optimizer)

    def epsilon_schedule(self) -> LinearSchedule:
        """Training's epsilon over the job's env steps: the config's linear schedule."""
        config = self.config
        return LinearSchedule(config.epsilon_start, config.epsilon_end, config.epsilon_decay_env_steps,
                              config.epsilon_decay_start_env_steps)

    def store(self, experience: Experience):
        """Stores one step of every env (rewards clipped for learning if asked; the true last observation
        where an episode ended; discount 0 at learning terminals); returns (raw rewards, done)."""
        _, reward, done = store_step(self.memory, experience.observation, experience.action, experience.step_result,
                                     self.config.clip_rewards, self.config.terminal_on_life_loss)
        return reward, done

    def close(self) -> None:
        """Stops the agent's helper threads, if it has any."""


def act_and_store(env, actor, replay, observation: np.ndarray, epsilon, clip_rewards: bool,
                  terminal_on_life_loss: bool):
    """One step of a rank's acting path: epsilon-greedy actions for every env, one vector-env step, and the
    transitions stored in `replay` (learning rewards clipped if asked; the true last observation where an
    episode ended; discount 0 at learning terminals). Returns (next observations, raw rewards, done)."""
    action = actor.select_actions(observation, epsilon)
    return store_step(replay, observation, action, env.step(action), clip_rewards, terminal_on_life_loss)


def store_step(replay, observation: np.ndarray, action: np.ndarray, step_result, clip_rewards: bool,
               terminal_on_life_loss: bool):
    """Stores the transitions of one vector-env step (`step_result`, as `env.step` returns it) taken with
    `action` from `observation`; returns (next observations, raw rewards, done). The second half of
    `act_and_store`, for callers that step the env themselves (`send`/`recv`, to overlap it with learning)."""
    next_observation, reward, terminated, truncated, info = step_result
    done = terminated | truncated
    discount = learning_discounts(terminated, info, terminal_on_life_loss)
    learning_reward = np.sign(reward) if clip_rewards else reward
    replay.add(observation, action, learning_reward, discount, true_next_observations(next_observation, done, info),
               done)
    return next_observation, reward, done
