"""Munchausen DQN's own settings (Vieillard, Pietquin and Geist 2020): the entropy temperature tau, the scaling
alpha of the log-policy added to the reward, and the log-policy's clipping l0. Defaults are the paper's Atari agent
(its Table 3; google-research/google-research munchausen_rl/train.py: tau 0.03, alpha 0.9, clip_value_min -1)."""
from __future__ import annotations

import dataclasses
from typing import Optional

from hvd_dqn.agent.dqn.settings import (DuelingSettings, LayerNormSettings, NoisySettings, ReplaySettings,
                                       TDLossSettings)
from hvd_dqn.settings import in_unit_interval, positive_number, setting


def negative_number(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and value < 0 else "must be a number < 0"


@dataclasses.dataclass(frozen=True)
class MunchausenSettings(ReplaySettings, TDLossSettings, DuelingSettings, LayerNormSettings, NoisySettings):
    """M-DQN's settings: DQN's but double targets (its bootstrap is the soft value of the target's policy); tau, alpha
    and the clip."""

    entropy_temperature: float = setting(
        0.03, "M-DQN: tau, the temperature of the softmax policy pi = softmax(Q_target / tau) whose entropy the "
              "targets reward, in return units (Vieillard et al. 2020's Atari agent: 0.03).",
        purpose="Munchausen DQN's softmax policy", check=positive_number)
    munchausen_scale: float = setting(
        0.9, "M-DQN: alpha, the weight of tau log pi(a|s), the scaled log-policy of the action taken, added to the "
             "reward (0: soft DQN; Vieillard et al. 2020: 0.9).",
        purpose="Munchausen DQN's bonus", check=in_unit_interval)
    log_policy_clip: float = setting(
        -1.0, "M-DQN: l0, the lowest value of tau log pi(a|s) added to the reward, which would be minus infinity "
              "for an action the policy never takes (Vieillard et al. 2020: -1).",
        purpose="Munchausen DQN's bonus", check=negative_number)
