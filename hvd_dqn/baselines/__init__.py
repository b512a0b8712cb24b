"""Published learning curves that hvd_dqn's runs are compared with (hvd_dqn.reports.baseline).

The numbers are facts taken from the publishers' data files, kept here with their source:
- dopamine_atari_cnn.json: Dopamine's JAX agents with the Nature CNN, mean training-episode return per
  iteration of 250,000 agent steps, 5 seeds each (google/dopamine, baselines/atari/data/<game>_CNN.json).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import List

_DOPAMINE_FILE = os.path.join(os.path.dirname(__file__), "dopamine_atari_cnn.json")


@dataclasses.dataclass(frozen=True)
class PublishedCurve:
    """One agent's published curve: per window of `window_env_steps`, the seeds' values."""

    source: str
    game: str
    agent: str
    window_env_steps: int
    seeds_by_window: List[List[float]]

    def mean(self, window: int) -> float:
        values = self.seeds_by_window[window]
        return sum(values) / len(values)

    def low(self, window: int) -> float:
        return min(self.seeds_by_window[window])

    def high(self, window: int) -> float:
        return max(self.seeds_by_window[window])


def dopamine_curve(game: str, agent: str = "DQN") -> PublishedCurve:
    """Dopamine's published curve of `agent` on `game` (a ROM id such as "breakout"); ValueError naming the
    games and agents that exist otherwise."""
    with open(_DOPAMINE_FILE) as handle:
        data = json.load(handle)
    games = data["games"]
    if game not in games:
        raise ValueError(f"no Dopamine data for game {game!r}; kept here: {', '.join(sorted(games))}")
    if agent not in games[game]:
        raise ValueError(f"no Dopamine data for agent {agent!r} on {game}; kept here: {', '.join(sorted(games[game]))}")
    return PublishedCurve(source=data["source"], game=game, agent=agent,
                          window_env_steps=int(data["agent_steps_per_iteration"]),
                          seeds_by_window=games[game][agent])
