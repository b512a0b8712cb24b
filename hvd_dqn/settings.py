"""Settings that belong to one agent, declared beside its code: the base class and the field helper.

An agent's own settings (QR-DQN's quantiles, C51's support, PQN's rollout, a plugin's temperature) are a frozen
dataclass in its folder, each field made with `setting`, which keeps the default, the --help text (with the unit)
and the check of a value in one place:

    @dataclasses.dataclass(frozen=True)
    class QRDQNSettings(NoisySettings):
        num_quantiles: int = setting(200, "QR-DQN: quantiles of the return per action ...", check=positive_int)

Its registry entry names the class (`hvd_dqn.agent.registry.AgentEntry.settings_class`); the shipped commands
define a flag for every field of every registered agent's class, and the `TrainConfig` of a run holds an instance
of its agent's class (`TrainConfig.agent_settings`), whose fields read as the config's own (`config.num_quantiles`).

This module imports nothing of hvd_dqn: the config, the flags and every agent's settings build on it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

# A check returns None for a good value, or what the value must be ("must be a positive integer").
Check = Callable[[Any], Optional[str]]


class ConfigError(ValueError):
    """A setting is invalid. The message starts with the flag, e.g. `--batch_size=-1: must be ...`."""


def setting(default, help: str, purpose: str, check: Optional[Check] = None, flag_type: Optional[type] = None):
    """A field of an agent's settings: its default, its --help text, what it is for (`purpose`: how the refusal
    of it under another agent names it, e.g. "the quantiles of the return") and the check of its value.
    `flag_type`: the flag's type where the default does not tell it (an optional number whose default is None)."""
    return dataclasses.field(default=default, metadata={"help": help, "purpose": purpose, "check": check,
                                                        "flag_type": flag_type})


def positive_int(value) -> Optional[str]:
    return None if isinstance(value, int) and not isinstance(value, bool) and value > 0 else \
        "must be a positive integer"


def positive_number(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and value > 0 else "must be a number > 0"


def in_unit_interval(value) -> Optional[str]:
    return None if isinstance(value, (int, float)) and 0.0 <= value <= 1.0 else "must be in [0, 1]"


def one_of(*choices: str) -> Check:
    def check(value) -> Optional[str]:
        return None if value in choices else f"must be one of {', '.join(choices)}"
    return check


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    """The settings one agent reads and no setting of every agent is: a frozen dataclass of `setting` fields.

    `memory` says what the agent learns from, which decides how a job's work divides over its ranks
    (hvd_dqn.rank_split): "replay" (a replay memory and a target network, each rank drawing minibatches of its own
    memory) or "rollout" (each rank's rollout, learned from whole; the class then answers the rollout's questions:
    `RolloutSettings`)."""

    memory = "replay"

    def check(self) -> None:
        """Raises ConfigError naming the first setting whose own check fails."""
        for field in dataclasses.fields(self):
            check = field.metadata.get("check")
            value = getattr(self, field.name)
            problem = check(value) if check is not None else None
            if problem:
                shown = str(value).lower() if isinstance(value, bool) else value
                raise ConfigError(f"--{field.name}={shown}: {problem}")

    def check_with(self, config) -> None:
        """Raises ConfigError for a bad combination of these settings with each other or with the config's
        (`config`: the run's hvd_dqn.config.TrainConfig); each setting's own check is its field's."""

    def update_grows_with_ranks(self) -> bool:
        """Whether each of N ranks adds a whole batch of its own to every update, so that the global batch grows
        N-fold and the job makes N times fewer updates per env step: then --scale_lr_by_workers and
        --scale_schedules_by_workers apply (hvd_dqn.rank_split). False for an agent whose ranks share one batch."""
        return False

    def fixed_env_epsilons(self, num_envs_total: int):
        """The fixed exploration rate of each of the job's `num_envs_total` envs (a numpy array, env i of rank r
        at r * envs per rank + i), or None where every env follows the --epsilon_* schedule."""
        return None

    def target_period(self) -> int:
        """Updates between two copies of the online network into a target network; 0 for an agent without one."""
        return 0

    def values(self) -> Dict[str, Any]:
        """name -> value of every setting, as config.json writes them."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class RolloutSettings(AgentSettings):
    """The settings of an agent that learns from each rank's rollout, whole (PQN's): they answer how a job's rollout
    divides over N ranks, which hvd_dqn.rank_split asks of them."""

    memory = "rollout"

    def rank_envs(self, config, world_size: int) -> int:
        """One rank's envs (ConfigError where the job's do not split so)."""
        raise NotImplementedError

    def env_steps_before_first_update(self, config, world_size: int) -> int:
        """The job's env steps before its first update: every rank's first rollout full."""
        raise NotImplementedError

    def check_world(self, config, world_size: int) -> None:
        """Raises ConfigError if the rollout's updates do not split over `world_size` ranks."""


def help_text(field: dataclasses.Field) -> str:
    return field.metadata.get("help", "")


def purpose(field: dataclasses.Field) -> str:
    return field.metadata.get("purpose", "")


def flag_type(field: dataclasses.Field) -> type:
    """The type of the flag of a setting: its `flag_type`, else its default's."""
    given = field.metadata.get("flag_type")
    return given if given is not None else type(field.default)
