"""IQN's own settings (Dabney et al. 2018): its samples of quantile levels, their embedding, the loss's threshold."""
from __future__ import annotations

import dataclasses

from hvd_dqn.agent.dqn.settings import DoubleQSettings, ReplaySettings
from hvd_dqn.settings import setting


@dataclasses.dataclass(frozen=True)
class IQNSettings(ReplaySettings, DoubleQSettings):
    """IQN's settings: DQN's replay memory, target network and double targets; its samples of quantile levels."""

    num_tau_samples: int = setting(
        64, "IQN: quantile levels tau sampled per transition for the online network (N; Dabney et al. 2018 and "
            "Dopamine: 64).", purpose="IQN's quantile levels per transition")
    num_tau_prime_samples: int = setting(
        64, "IQN: quantile levels tau' sampled per transition for the target network's samples of the target "
            "distribution (N'; Dopamine: 64).", purpose="IQN's target samples")
    num_quantile_samples: int = setting(
        32, "IQN: quantile levels whose mean values choose the target's greedy action (K, sampled; Dopamine: 32); "
            "acting and the exported policy take the mean at K evenly spaced levels instead.", purpose="IQN's quantile levels for choosing actions")
    quantile_embedding_dim: int = setting(
        64, "IQN: cosines cos(pi i tau), i = 1..n, that embed each tau before a ReLU layer as wide as the torso's "
            "features (n; Dopamine: 64).", purpose="IQN's cosine embedding")
    kappa: float = setting(
        1.0, "IQN: threshold of the quantile Huber loss on each pairwise quantile TD error, in return units "
             "(Dabney et al. 2018; Dopamine: 1).", purpose="the quantile Huber loss")
