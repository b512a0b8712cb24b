"""The settings of the DQN family, declared once and composed by its agents: the replay memory and the target
network (every agent that learns from a replay memory), double-DQN targets, the TD loss on one Q-value per action,
the Q-network's heads and layers, and noisy networks (Fortunato et al. 2018).

Each group is a small settings class; an agent's own class inherits the groups it reads (QR-DQN's: the replay
memory and target network, double targets, dueling heads and noisy networks, then its quantiles), so each setting
has one default, one help text and one check, and an agent never holds a setting it does not read. PQN reads the
TD loss and the network's groups and none of the replay memory's.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from hvd_dqn.settings import AgentSettings, ConfigError, one_of, positive_int, positive_number, setting

LOSSES = ("huber", "mse")  # the TD losses hvd_dqn.agent.data_parallel_update.td_loss knows
RANK_SCALINGS = ("batch", "updates")  # how the work of an update is shared when ranks are added


def _probability(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and 0.0 <= value <= 1.0 else "must be a probability in [0, 1]"


def _non_negative(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and value >= 0 else "must be a number >= 0"


def _exponent(what: str):
    def check(value) -> Optional[str]:
        return None if isinstance(value, (int, float)) and 0.0 <= value <= 1.0 else f"must be in [0, 1] ({what})"
    return check


def _n_step(value) -> Optional[str]:
    return None if isinstance(value, int) and 1 <= value <= 100 else "must be an integer from 1 to 100"


def _tau(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and 0.0 < value <= 1.0 else \
        "must be in (0, 1] (1 copies the online network)"


_REPLAY = "the replay memory"
_PRIORITIES = "prioritised replay"
_TARGET = "the target network"


@dataclasses.dataclass(frozen=True)
class ReplaySettings(AgentSettings):
    """A replay memory, the replay ratio, how ranks share the updates, and a target network: what every agent that
    learns from a replay memory reads. Counts of transitions are the job's, split over the ranks (hvd_dqn.rank_split),
    unless --counts_per_rank or --elastic makes them each rank's."""

    replay_capacity: int = setting(
        50_000, "Transitions the job's replay memories hold, split evenly over the ranks (with --counts_per_rank or "
                "--elastic, each rank's own); the oldest are overwritten.", purpose=_REPLAY, check=positive_int)
    learning_starts: int = setting(
        1_000, "Transitions the job's replay memories hold before updates begin: each rank waits for its share (and, "
               "under --rank_scaling=batch, for one --batch_size); with --counts_per_rank or --elastic, each rank's "
               "own.", purpose=_REPLAY, check=positive_int)
    batch_size: int = setting(
        64, "Transitions per rank per update under --rank_scaling=batch (the global batch is batch_size x ranks); "
            "the global batch, split over the ranks, under updates.",
        purpose="the replay memory's minibatches (PQN's are a --num_minibatches-th of each rollout)", check=positive_int)
    train_frequency: int = setting(
        1, "Env steps per rank between two gradient updates (the replay ratio is batch_size / train_frequency "
           "samples per env step, independent of the rank count).",
        purpose="the replay ratio (PQN learns from each rollout once it is collected)", check=positive_int)
    prioritized_replay: bool = setting(
        False, "Proportional prioritised replay (Schaul et al. 2016): transitions drawn in proportion to |TD "
               "error|^alpha, losses weighted by importance sampling; per rank.", purpose=_REPLAY)
    priority_alpha: float = setting(
        0.6, "Prioritised replay: how strongly priorities skew sampling (0 uniform, 1 fully; Schaul: 0.6).",
        purpose=_PRIORITIES, check=_exponent("0 is uniform sampling"))
    priority_beta_start: float = setting(
        0.4, "Prioritised replay: importance-sampling exponent at the start, annealed linearly to 1 at "
             "--total_env_steps (Schaul: 0.4).", purpose=_PRIORITIES,
        check=_exponent("it is annealed to --priority_beta_end"))
    priority_beta_end: float = setting(
        1.0, "Prioritised replay: the importance-sampling exponent reached at --total_env_steps (Schaul: 1; equal to "
             "--priority_beta_start for a fixed exponent).", purpose=_PRIORITIES,
        check=_exponent("1: the full importance-sampling correction"))
    priority_epsilon: float = setting(
        1e-6, "Prioritised replay: added to |TD error| so every transition can be drawn.", purpose=_PRIORITIES,
        check=positive_number)
    n_step: int = setting(
        1, "Env steps of rewards summed before bootstrapping (n-step returns; Rainbow uses 3); the sum stops at "
           "episode ends and learning terminals.",
        purpose="the replay memory's n-step returns (PQN's returns are Q(lambda), --q_lambda)", check=_n_step)
    apex_exploration: bool = setting(
        False, "Ape-X exploration (Horgan et al. 2018): env i of the N envs of all ranks acts with the fixed "
               "epsilon_i = base^(1 + alpha * i / (N - 1)) instead of following the schedule.",
        purpose="Ape-X's per-env epsilons")
    apex_epsilon_base: float = setting(0.4, "Ape-X exploration: the base epsilon (0.4 in Ape-X).",
                                       purpose="Ape-X's per-env epsilons", check=_probability)
    apex_alpha: float = setting(7.0, "Ape-X exploration: how fast epsilon falls across the envs (7 in Ape-X).",
                                purpose="Ape-X's per-env epsilons", check=_non_negative)
    # batch is the default because it shortens the time to a score: under updates every update waits for a sync that
    # half the batch does not make up for, and on GPUs, where a smaller batch costs the same, it cannot gain at all.
    rank_scaling: str = setting(
        "batch", "How N ranks share the updates. batch (default): each rank updates every --train_frequency of its "
                 "own env steps on --batch_size of its own transitions: N times fewer updates per env step, each "
                 "with an N times larger global batch, so the step size is scaled by N and the schedules counted in "
                 "updates divided by N (--scale_lr_by_workers, --scale_schedules_by_workers, both on): ranks add "
                 "speed, since no update waits for a smaller one. updates: the job updates every --train_frequency "
                 "env steps summed over ranks, each rank adding --batch_size / N transitions: one rank's updates and "
                 "batch at any N, each update waiting for a sync (docs/scaling.md compares the two). --elastic needs "
                 "batch.", purpose="how ranks share DQN's updates (PQN's ranks share minibatches by --pqn_minibatches)",
        check=one_of(*RANK_SCALINGS))
    target_update_period: int = setting(
        500, "Gradient updates between two copies of the online network into the target network.", purpose=_TARGET,
        check=positive_int)
    target_update_tau: float = setting(
        1.0, "At each target update: 1 copies the online network (Mnih et al. 2015); tau < 1 moves the target to tau "
             "x online + (1 - tau) x target (Polyak averaging, Lillicrap et al. 2016; usually with "
             "--target_update_period=1).", purpose=_TARGET, check=_tau)

    def update_grows_with_ranks(self) -> bool:
        return self.rank_scaling == "batch"

    def target_period(self) -> int:
        return self.target_update_period

    def fixed_env_epsilons(self, num_envs_total: int):
        from hvd_dqn.agent.schedules import apex_epsilons

        return apex_epsilons(num_envs_total, self.apex_epsilon_base, self.apex_alpha) if self.apex_exploration else None

    def check_with(self, config) -> None:
        if self.learning_starts > self.replay_capacity:
            raise ConfigError(
                f"--learning_starts={self.learning_starts}: must be <= --replay_capacity={self.replay_capacity} (both "
                "count transitions: the job's, or each rank's with --counts_per_rank or --elastic)")
        if self.batch_size > self.learning_starts:
            raise ConfigError(f"--batch_size={self.batch_size}: must be <= --learning_starts={self.learning_starts}, "
                              "so the first minibatch can be drawn")
        # Under --rank_scaling=updates the job's batch is split over a fixed number of ranks; an elastic world that
        # grows or shrinks would have to re-split it (and the envs and memories) between updates.
        if config.elastic and self.rank_scaling == "updates":
            raise ConfigError("--rank_scaling=updates: splits the job's --batch_size over a fixed number of ranks, "
                              "which --elastic does not have; add --rank_scaling=batch (the default, which --elastic "
                              "runs in)")
        if config.draw_ahead == "on" and self.prioritized_replay:
            raise ConfigError("--draw_ahead=on: prioritised replay draws each minibatch with the priorities the update "
                              "before it set, so it cannot be drawn ahead; add --noprioritized_replay or leave "
                              "--draw_ahead at auto")


@dataclasses.dataclass(frozen=True)
class DoubleQSettings(AgentSettings):
    double_dqn: bool = setting(
        False, "Use double-DQN targets (van Hasselt et al. 2016): the online network picks a', the target network "
               "values it.", purpose=_TARGET)


@dataclasses.dataclass(frozen=True)
class TDLossSettings(AgentSettings):
    """The loss on one Q-value per action, which the distributional agents replace by a loss on distributions."""

    loss: str = setting(
        "huber", "TD loss: huber (Mnih et al. 2015; quadratic within --huber_delta, linear beyond) or mse (the mean "
                 "squared TD error, without a factor 1/2, as Dopamine's JAX DQN).",
        purpose="the TD loss on Q-values", check=one_of(*LOSSES))
    huber_delta: float = setting(1.0, "Huber loss threshold on the TD error, in return units.",
                                 purpose="the TD loss on Q-values", check=positive_number)


@dataclasses.dataclass(frozen=True)
class DuelingSettings(AgentSettings):
    dueling: bool = setting(False, "Dueling heads (Wang et al. 2016): Q = V + A - mean(A), for the MLP and the "
                                   "Nature CNN.", purpose="the Q-network's heads")


@dataclasses.dataclass(frozen=True)
class LayerNormSettings(AgentSettings):
    layer_norm: bool = setting(
        False, "LayerNorm (Ba et al. 2016) after every hidden layer, before its ReLU: what keeps PQN's bootstrapped "
               "targets stable without a target network (Gallici et al. 2024).", purpose="the Q-network's hidden layers")


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


# What the code the agents share (the networks, DQN's learner) asks of a config whose agent may not have the group:
# an agent without the setting has it off.
def double_dqn(config) -> bool:
    return isinstance(config.agent_settings, DoubleQSettings) and config.agent_settings.double_dqn


def dueling(config) -> bool:
    return isinstance(config.agent_settings, DuelingSettings) and config.agent_settings.dueling


def layer_norm(config) -> bool:
    return isinstance(config.agent_settings, LayerNormSettings) and config.agent_settings.layer_norm


def noisy_nets(config) -> bool:
    return isinstance(config.agent_settings, NoisySettings) and config.agent_settings.noisy_nets


@dataclasses.dataclass(frozen=True)
class DQNSettings(ReplaySettings, DoubleQSettings, TDLossSettings, DuelingSettings, LayerNormSettings, NoisySettings):
    """DQN's settings: a replay memory and a target network, double targets, the TD loss, dueling heads, LayerNorm
    and noisy networks."""
