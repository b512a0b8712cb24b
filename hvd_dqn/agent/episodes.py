"""Evaluation episodes: the agent acts (nearly) greedily and nothing is learned or stored."""
from __future__ import annotations

import dataclasses

import numpy as np

from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.envs import env_seeds


@dataclasses.dataclass
class EpisodeResults:
    returns: np.ndarray  # (episodes,) undiscounted sum of rewards
    lengths: np.ndarray  # (episodes,) env steps

    def summary(self) -> dict:
        return {
            "mean_return": float(np.mean(self.returns)),
            "median_return": float(np.median(self.returns)),
            "std_return": float(np.std(self.returns)),
            "min_return": float(np.min(self.returns)),
            "max_return": float(np.max(self.returns)),
            "mean_length": float(np.mean(self.lengths)),
            "episodes": int(len(self.returns)),
        }


def run_episodes(actor: EpsilonGreedyActor, env, epsilon: float, seed: int) -> EpisodeResults:
    """Plays exactly one episode in each of the vector env's sub-environments and returns them.

    Counting each env's first episode (instead of the first N episodes to finish) keeps the estimate
    unbiased: short episodes do not finish first and crowd out long ones.
    """
    count = env.num_envs
    observation, _ = env.reset(seed=env_seeds(seed, count))
    returns = np.zeros(count, dtype=np.float64)
    lengths = np.zeros(count, dtype=np.int64)
    running = np.ones(count, dtype=bool)
    while running.any():
        actions = actor.select_actions(observation, epsilon)
        observation, reward, terminated, truncated, _ = env.step(actions)
        returns += np.where(running, reward, 0.0)
        lengths += running
        running &= ~(terminated | truncated)
    return EpisodeResults(returns=returns, lengths=lengths)
