"""QR-DQN's own settings (Dabney et al. 2017): the quantiles it learns and the loss's threshold."""
from __future__ import annotations

import dataclasses

from hvd_dqn.agent.dqn.settings import DoubleQSettings, DuelingSettings, NoisySettings, ReplaySettings
from hvd_dqn.settings import setting


@dataclasses.dataclass(frozen=True)
class QRDQNSettings(ReplaySettings, DoubleQSettings, DuelingSettings, NoisySettings):
    """QR-DQN's settings: DQN's replay memory, target network, double targets, dueling heads and noisy networks;
    its quantiles and their loss."""

    num_quantiles: int = setting(
        200, "QR-DQN: quantiles of the return learned per action, at the midpoints (2i + 1) / 2N of N equal parts "
             "of [0, 1] (Dabney et al. 2017; Dopamine's num_atoms: 200).", purpose="the quantiles of the return")
    kappa: float = setting(
        1.0, "QR-DQN: threshold of the quantile Huber loss on each pairwise quantile TD error, in return units: "
             "quadratic within it, linear beyond (Dabney et al. 2017; Dopamine: 1).", purpose="the quantile Huber loss")
