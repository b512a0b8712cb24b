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


class GreedyActionTally:
    """Over the states of the episodes played, how often the greedy policy picks each action and how far its
    best Q-value stands above the second best (the action gap): a policy that has collapsed onto one action, or
    whose Q-values barely tell its actions apart, shows here before it shows in the scores."""

    def __init__(self, q_values_of, names):
        self._q_values_of = q_values_of  # observations -> (envs, actions) Q-values, as the actor takes its argmax
        self.names = list(names)
        self.counts = np.zeros(len(self.names), dtype=np.int64)
        self.gaps = []

    def __call__(self, observation: np.ndarray, running: np.ndarray) -> None:
        """Counts the states of the envs whose episode is still `running` (a finished env is stepped on until the
        last one ends, but its states are not the episodes')."""
        if not running.any():
            return
        q_values = np.asarray(self._q_values_of(observation[running]), dtype=np.float64)
        self.counts += np.bincount(q_values.argmax(axis=-1), minlength=len(self.names))
        ordered = np.sort(q_values, axis=-1)
        self.gaps.append(ordered[:, -1] - ordered[:, -2] if q_values.shape[-1] > 1 else np.zeros(len(q_values)))

    def summary(self) -> dict:
        states = int(self.counts.sum())
        return {"states": states,
                "greedy_action_shares": {name: round(float(count) / max(states, 1), 4)
                                         for name, count in zip(self.names, self.counts)},
                "action_gap_median": float(np.median(np.concatenate(self.gaps))) if self.gaps else None}


def run_episodes(actor: EpsilonGreedyActor, env, epsilon: float, seed: int, watch=None) -> EpisodeResults:
    """Plays exactly one episode in each of the vector env's sub-environments and returns them.

    Counting each env's first episode (instead of the first N episodes to finish) keeps the estimate
    unbiased: short episodes do not finish first and crowd out long ones. `watch(observation, running)`, if
    given, sees every step's observations before the actor acts on them (GreedyActionTally).
    """
    count = env.num_envs
    observation, _ = env.reset(seed=env_seeds(seed, count))
    returns = np.zeros(count, dtype=np.float64)
    lengths = np.zeros(count, dtype=np.int64)
    running = np.ones(count, dtype=bool)
    while running.any():
        if watch is not None:
            watch(observation, running)
        actions = actor.select_actions(observation, epsilon)
        observation, reward, terminated, truncated, _ = env.step(actions)
        returns += np.where(running, reward, 0.0)
        lengths += running
        running &= ~(terminated | truncated)
    return EpisodeResults(returns=returns, lengths=lengths)
