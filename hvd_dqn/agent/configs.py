"""A run's config with its agent's settings: made, read back and checked where the registry is known.

`hvd_dqn.config.TrainConfig` holds what every agent reads and, in `agent_settings`, the settings of the agent's
own, of the class its registry entry names. This module joins the two: `make_config` builds a config from flat
settings (the flags' names, as a script or test gives them), `config_from_json` reads a run's config.json back
(also one written before the agents had settings of their own, or by an agent not installed here: then
without the agent's settings), and `validate` checks a config as the shipped
commands do: the agent known, no other agent's setting, the agent's own checks, then the shared settings.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from hvd_dqn.agent import registry
from hvd_dqn.config import ConfigError, TrainConfig, validate_shared
from hvd_dqn.settings import AgentSettings


def settings_class(agent: str):
    """The settings class of --agent=`agent`; ConfigError, one line naming the known agents, if there is none."""
    try:
        return registry.entry(agent).settings_class
    except registry.UnknownAgent as error:
        raise ConfigError(str(error)) from None


def make_config(**values) -> TrainConfig:
    """A config of `values` (flag names, the agent's own settings among them), the rest at their defaults. A
    setting no registered agent has and the config does not is refused (ConfigError naming it)."""
    agent = values.get("agent", TrainConfig.agent)
    known = set(shared_setting_names()) | set(registry.agent_setting_fields())
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"--{unknown[0]}: not a setting of hvd_dqn.train (see python -m hvd_dqn.train --help)")
    mine = {field.name for field in dataclasses.fields(settings_class(agent))}
    others = {name: value for name, value in values.items()
              if name not in mine and name not in shared_setting_names()}
    problem = registry.settings_problem(agent, others)
    if problem:
        raise ConfigError(problem)
    return TrainConfig.from_values(values, settings_class(agent))


def with_settings(config: TrainConfig, given: Iterable[str] = (), **changes) -> TrainConfig:
    """`config` with `changes` (flag names, shared or the agent's own). A new `agent` gets its own settings at
    their defaults, but for those of the same name, and the old agent's that are `given` (named by the user):
    refused (ConfigError) where the new agent does not read them."""
    own = settings_class(changes["agent"]) if "agent" in changes else settings_class(config.agent)
    mine = {field.name for field in dataclasses.fields(own)}
    kept = {name: value for name, value in config.setting_values().items()
            if name in shared_setting_names() or name in mine or name in set(given)}
    return make_config(**{**kept, **changes})


def config_from_json(text: str) -> TrainConfig:
    """The config a run's config.json holds, with the settings of its agent's class: also one written before
    the agents had settings of their own (every agent's settings flat in one object, the others' ignored)."""
    values = TrainConfig.json_values(text)
    try:
        own = registry.entry(values.get("agent", TrainConfig.agent)).settings_class
    except registry.UnknownAgent:  # an agent of a package not installed here: its settings cannot be read
        own = AgentSettings
    return TrainConfig.from_values(values, own)


def shared_setting_names():
    """The settings every agent's config has (TrainConfig's and its groups', not its agent's)."""
    return tuple(field.name for field in TrainConfig.setting_fields())


def check_agent(config: TrainConfig, given: Iterable[str] = ()) -> None:
    """The agent is registered and its settings are of its class; no setting that only other agents read is given
    or changed from its default (the entries' ownership, `registry.settings_problem`; another agent's own setting
    cannot be in the config at all: `make_config` refuses it); each of its own settings passes its check, then the
    settings class's and the agent's checks of them with the config's."""
    try:
        entry = registry.entry(config.agent)
    except registry.UnknownAgent as error:
        raise ConfigError(str(error)) from None
    if type(config.agent_settings) is not entry.settings_class:
        raise ConfigError(f"--agent={entry.name}: the config holds {type(config.agent_settings).__name__} where the "
                          f"agent reads {entry.settings_class.__name__}; make it with hvd_dqn.agent.configs.make_config")
    defaults = make_config(agent=entry.name).setting_values()
    given = set(given)
    changed = {name: value for name, value in config.setting_values().items()
               if name in given or value != defaults.get(name)}
    problem = registry.settings_problem(entry.name, changed)
    if problem:
        raise ConfigError(problem)
    config.agent_settings.check()
    config.agent_settings.check_with(config)
    own_checks = registry.checks(entry.name)
    if own_checks is not None:
        own_checks(config)


def validate(config: TrainConfig, check_logdir_writable: bool = True, given: Iterable[str] = ()) -> TrainConfig:
    """Raises ConfigError for the first invalid setting; returns the config unchanged otherwise: the agent's
    (`check_agent`) before the shared ones (hvd_dqn.config.validate_shared), whose relations would name a setting
    an agent does not use.

    `check_logdir_writable` is true only on the rank that writes (rank 0): it creates the log folder if
    needed and proves it can write there, so a bad path fails before any training time is spent. `given`: the
    settings the user named (on the command line, in a flagfile, as keywords), whatever their values: one that
    only other agents read is refused even at its default, where a user would believe it was used.
    """
    check_agent(config, given)
    return validate_shared(config, check_logdir_writable)
