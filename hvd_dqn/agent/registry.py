"""The agents hvd_dqn trains, by their --agent names: the one place that knows which agents there are.

An agent registers once, as an `AgentEntry`: its name, a line that says what it is, the class that implements it
(named as "module:Class", so that reading the registry imports no TensorFlow and no agent code), the settings that
are its own, and what it learns from. Everything else asks the entry or the class, never the name: the trainer
builds the class's agent, the checks refuse another agent's settings by the entries' ownership, evaluation and
export act greedily through the class's `q_values`.

The built-in agents (`BUILT_IN`) are found by their packages' `AGENT`; an agent of another package registers with
`register(entry)` in code that runs before training (a script, a test), or, for the shipped commands, through
the `hvd_dqn.agents` entry-point group of its installed package (`[project.entry-points."hvd_dqn.agents"]
myagent = "my_package.my_agent:AGENT"`). docs/architecture.md says how to write one.

This module imports nothing of hvd_dqn but its phrasing (hvd_dqn.text) and the settings' base class
(hvd_dqn.settings), which import nothing: every agent's package names its entry here.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from hvd_dqn.settings import AgentSettings, RolloutSettings, purpose
from hvd_dqn.text import listed

# The packages whose `AGENT` is a built-in entry, in the order texts list them.
BUILT_IN = ("hvd_dqn.agent.dqn", "hvd_dqn.agent.qrdqn", "hvd_dqn.agent.iqn", "hvd_dqn.agent.c51", "hvd_dqn.agent.pqn",
            "hvd_dqn.agent.munchausen")
ENTRY_POINT_GROUP = "hvd_dqn.agents"
MEMORIES = ("replay", "rollout")


class UnknownAgent(LookupError):
    """No agent of that name is registered. The message is one line naming the known ones."""


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    """One agent as the registry knows it.

    `settings_class`: the dataclass of the settings that are its own (hvd_dqn.settings.AgentSettings: each field's
    default, --help text, purpose and check), which every shipped command defines flags for and a run's config
    holds (`TrainConfig.agent_settings`); it also says what the agent learns from (`memory`). A family shares
    settings by composing its groups (hvd_dqn.agent.dqn.settings: the replay memory and target network, the TD
    loss, the heads). A setting of other agents' classes and not of this one's must be left out when this one
    trains, or the check names it (`settings_problem`). `without_them` says, after "--agent=NAME", why the
    others' settings mean nothing to it. `checks`: "module:function" of a function that raises
    hvd_dqn.config.ConfigError for a bad combination of its settings with the config's (each setting's own check
    is its field's); `shapes_checkpoint`: its settings that a resumed run must keep; `update_metrics`: what its
    updates report beside "td_loss" and "q_mean" (names in the dict its learner's update returns), each averaged
    over the updates between log points into a metrics.csv column of that name and a TensorBoard scalar under
    losses/."""
    name: str
    title: str  # how texts name it: "DQN", "QR-DQN"
    summary: str  # one line for --agent's help and the README: what it is, from which paper
    implementation: str  # "module:Class" of the agent class (hvd_dqn.agent.interface.AgentClass)
    without_them: str
    settings_class: type = AgentSettings
    acts_ahead: bool = True  # whether acting may run ahead of learning on a thread of its own (--pipeline)
    checks: Optional[str] = None
    # Its settings that decide the shapes of what its checkpoint holds: a resumed run must agree on them.
    shapes_checkpoint: Tuple[str, ...] = ()
    update_metrics: Tuple[str, ...] = ()
    # The agent of Dopamine's published baselines (hvd_dqn.baselines) with the same algorithm ("DQN", "QR-DQN"), or a
    # function of a run's settings (name -> value, as config.json holds them) returning (how texts name the run's
    # agent, Dopamine's agent or None) where the settings decide it; None: Dopamine publishes none.
    dopamine: Union[None, str, Callable[[Mapping[str, object]], Tuple[str, Optional[str]]]] = None
    # Names users know it by that are not --agent names (e.g. "rainbow" for C51 with Dopamine's Rainbow preset),
    # each with the line an unknown --agent of that name answers with.
    known_as: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not (isinstance(self.settings_class, type) and issubclass(self.settings_class, AgentSettings)
                and dataclasses.is_dataclass(self.settings_class)):
            raise ValueError(f"agent {self.name!r}: settings_class must be a dataclass subclassing "
                             f"hvd_dqn.settings.AgentSettings, not {self.settings_class!r}")
        if self.settings_class.memory not in MEMORIES:
            raise ValueError(f"agent {self.name!r}: its settings' memory must be one of {', '.join(MEMORIES)}, not "
                             f"{self.settings_class.memory!r}")
        if self.settings_class.memory == "rollout" and not issubclass(self.settings_class, RolloutSettings):
            raise ValueError(f"agent {self.name!r}: an agent that learns from a rollout has settings subclassing "
                             "hvd_dqn.settings.RolloutSettings, which say how its rollout divides over the ranks")
        if ":" not in self.implementation:
            raise ValueError(f"agent {self.name!r}: implementation must read 'module:Class', not "
                             f"{self.implementation!r}")

    @property
    def memory(self) -> str:
        """What it learns from: "replay" (a replay memory and a target network) or "rollout"."""
        return self.settings_class.memory

    def owned(self) -> Dict[str, str]:
        """Every setting of its own, name -> what it is for: its `settings_class`'s fields."""
        return {field.name: purpose(field) for field in dataclasses.fields(self.settings_class)}


_entries: Dict[str, AgentEntry] = {}
_loaded = False


def register(entry: AgentEntry) -> AgentEntry:
    """Adds `entry` (or replaces one of the same name and implementation: registering twice is harmless)."""
    _load()
    known = _entries.get(entry.name)
    if known is not None and known.implementation != entry.implementation:
        raise ValueError(f"--agent={entry.name} is registered already, by {known.implementation}")
    _entries[entry.name] = entry
    return entry


def entry(name: str) -> AgentEntry:
    """The entry of --agent=`name`; UnknownAgent, one line naming the known agents, if there is none: where an
    agent is known by that name (`known_as`), how to train it; else the closest name, if one is close."""
    import difflib

    _load()
    if name not in _entries:
        for known in _entries.values():
            for alias, how in known.known_as.items():
                if name.lower().replace("-", "").replace("_", "") == alias:
                    raise UnknownAgent(f"--agent={name}: not an agent of its own; {how}")
        close = difflib.get_close_matches(name.lower(), list(_entries), n=1, cutoff=0.5)
        hint = f"did you mean --agent={close[0]}? " if close else ""
        raise UnknownAgent(f"--agent={name}: unknown agent; {hint}the agents are {', '.join(_entries)}")
    return _entries[name]


def entries() -> List[AgentEntry]:
    """Every registered agent, built-in ones first."""
    _load()
    return list(_entries.values())


def implementation(name: str):
    """The agent class of --agent=`name` (imported on first use)."""
    return _resolve(entry(name).implementation)


def checks(name: str) -> Optional[Callable]:
    """The function that checks --agent=`name`'s own settings, or None."""
    reference = entry(name).checks
    return _resolve(reference) if reference else None


def settings_problem(name: str, changed: Mapping[str, object]) -> Optional[str]:
    """For --agent=`name` and the settings the user gave or changed from their defaults (name -> value): the one
    line naming the first that only other agents read, or None."""
    chosen = entry(name)
    own = chosen.owned()
    for setting, value in changed.items():
        if setting in own:
            continue
        owners = [other for other in entries() if setting in other.owned()]
        if not owners:
            continue  # a setting every agent reads, or none
        what = owners[0].owned()[setting]
        titles = listed([owner.title for owner in owners])
        return (f"--{setting}={_flag_text(value)}: a setting of {titles} ({what}); --agent={name} "
                f"{chosen.without_them}. Leave it out, or use --agent={owners[0].name}")
    return None


def dopamine_counterpart(settings: Mapping[str, object]) -> Tuple[str, Optional[str]]:
    """(how texts name a run's agent, the Dopamine agent with the same algorithm or None) for a run's settings
    (its config.json), as its entry's `dopamine` says; an agent not registered here is named by its --agent name."""
    name = str(settings.get("agent", "dqn"))
    try:
        known = entry(name)
    except UnknownAgent:
        return name.upper(), None
    if callable(known.dopamine):
        return known.dopamine(settings)
    return known.title, known.dopamine


def agent_setting_fields() -> Dict[str, Tuple[dataclasses.Field, List[AgentEntry]]]:
    """Every setting of the registered agents' settings classes, name -> (its field in the first agent that has
    it, the agents that have it), in the order of the entries: what the shipped commands define flags for. Two
    agents may share a setting (--kappa: QR-DQN's and IQN's) if its flag's type is the same."""
    from hvd_dqn.settings import flag_type

    found: Dict[str, Tuple[dataclasses.Field, List[AgentEntry]]] = {}
    for known in entries():
        for field in dataclasses.fields(known.settings_class):
            if field.name not in found:
                found[field.name] = (field, [known])
                continue
            first, owners = found[field.name]
            if flag_type(first) is not flag_type(field):
                raise ValueError(f"--agent={known.name}'s setting {field.name} is a {flag_type(field).__name__}, "
                                 f"but --agent={owners[0].name}'s of that name a {flag_type(first).__name__}: one "
                                 "flag cannot be both; rename it")
            owners.append(known)
    return found


def _flag_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _resolve(reference: str):
    module, _, attribute = reference.partition(":")
    value = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _load() -> None:
    """The built-in agents, then those of installed packages' entry points, once."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for package in BUILT_IN:
        agent = importlib.import_module(package).AGENT
        _entries.setdefault(agent.name, agent)
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        agent = point.load()
        _entries.setdefault(agent.name, agent)
