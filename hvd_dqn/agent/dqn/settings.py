"""The settings of DQN's own that the agents on its Q-networks share: noisy networks (Fortunato et al. 2018).

DQN's replay memory and target network are read by every agent of the family; their settings are the config's
(hvd_dqn.config.TrainConfig), owned by the family through the registry entries' `settings`."""
from __future__ import annotations

import dataclasses

from hvd_dqn.settings import AgentSettings, positive_number, setting


@dataclasses.dataclass(frozen=True)
class NoisySettings(AgentSettings):
    """Noisy networks, for the agents whose Q-network hvd_dqn.agent.networks builds of Dense layers."""

    noisy_nets: bool = setting(
        False, "Noisy networks (Fortunato et al. 2018): every fully connected layer of the Q-network gets learned "
               "factorised Gaussian noise on its weights, drawn afresh at every step and update, and exploration "
               "comes from it: training acts greedily on the noisy network (epsilon 0, the --epsilon_* settings "
               "unused), evaluation and export on its means. With --agent=c51, --n_step=3, --prioritized_replay, "
               "--dueling and --double_dqn: Hessel et al.'s full Rainbow.", purpose="the Q-network's fully connected layers")
    noisy_sigma0: float = setting(
        0.5, "Noisy networks: each noise scale starts at sigma0 / sqrt(fan-in) (Fortunato et al. 2018 and Hessel et "
             "al. 2018: 0.5; Dopamine's FullRainbowNetwork: 0.1).", purpose="noisy networks")


def noisy_nets(config) -> bool:
    """Whether `config`'s agent has noisy networks on (an agent without the setting has none)."""
    return isinstance(config.agent_settings, NoisySettings) and config.agent_settings.noisy_nets


@dataclasses.dataclass(frozen=True)
class DQNSettings(NoisySettings):
    """DQN's own settings: noisy networks (its replay memory's and target network's are the config's)."""
