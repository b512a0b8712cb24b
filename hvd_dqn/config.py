"""The validated training configuration: one frozen object built once from the flags.

Library code receives a `TrainConfig` (or the few values it needs) and never reads flags. `validate`
checks every value and the relations between them, and raises `ConfigError` whose message names the flag
and what is allowed, so the entry points can print one clear line instead of a traceback.

Units used throughout:
- "env steps" are single-environment transitions, summed over all envs of all ranks unless a name says
  `per_rank`; with N ranks of E envs each, one acting iteration is N * E env steps.
- "updates" are synchronous gradient steps; every rank takes part in each one.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from hvd_dqn.logdir import storage
from hvd_dqn.settings import AgentSettings, ConfigError  # noqa: F401  (ConfigError: raised and named from here)

NETWORKS = ("auto", "mlp", "nature_cnn", "minatar_cnn")  # hvd_dqn.agent.networks.build_q_network
CONV_PADDINGS = ("valid", "same")  # the Nature CNN's convolutions: Mnih et al.'s, or Flax's (Dopamine)
OPTIMIZERS = ("adam", "rmsprop", "radam")  # hvd_dqn.agent.optimizers.make_optimizer
LR_SCALE_RULES = ("linear", "sqrt")  # --scale_lr_by_workers: the rate times N, or times sqrt(N)
PIPELINE_MODES = ("auto", "on", "off")
DRAW_AHEAD_MODES = ("auto", "on", "off")  # auto: on where the rank's update runs on a GPU


@dataclasses.dataclass(frozen=True)
class AtariProtocol:
    """How an Atari game is played and learned from (ignored for classic control and MinAtar); see
    hvd_dqn.envs.AtariSettings for sources. A group of TrainConfig, read as the config's own (`config.noop_max`)."""

    repeat_action_probability: float = 0.25  # sticky actions
    full_action_space: bool = False
    noop_max: int = 30  # no-op actions at episode start, at most
    fire_reset: bool = True  # press FIRE at each reset in games that need it (off in Dopamine's protocol)
    max_episode_frames: int = 108_000  # emulator frames; reaching it is a truncation
    env_threads: int = 0  # emulator threads per rank; 0: the CPUs this process may use divided by its host's ranks
    terminal_on_life_loss: bool = False  # for learning only: a lost life has discount 0
    clip_rewards: bool = False  # learn from sign(reward); reported returns stay raw


@dataclasses.dataclass(frozen=True)
class Optimization:
    """The optimizer and its step size at any number of ranks (hvd_dqn.agent.optimizers, hvd_dqn.rank_split). A
    group of TrainConfig, read as the config's own (`config.learning_rate`)."""

    learning_rate: float = 1e-3
    adam_epsilon: float = 1e-7
    max_grad_norm: float = 10.0  # 0 disables clipping; the global norm of the allreduced gradient
    optimizer: str = "adam"
    rmsprop_rho: float = 0.95  # RMSprop: decay of the squared-gradient average (PyTorch's alpha)
    rmsprop_epsilon: float = 0.01  # RMSprop: added to the root of the second moment, as PyTorch does
    rmsprop_centered: bool = True  # RMSprop: subtract the squared mean gradient (Graves 2013)
    layer_adaptation: bool = False  # each variable's step scaled to lr x its norm (LAMB's trust ratio)
    # Where each rank adds a whole batch of its own to every update (the DQN family's --rank_scaling=batch, PQN's
    # --pqn_minibatches=whole: AgentSettings.update_grows_with_ranks), multiply the learning rate by the number of
    # ranks (Goyal et al. 2017).
    scale_lr_by_workers: bool = True
    lr_scale_rule: str = "linear"  # with scale_lr_by_workers: times N (Goyal et al.) or times sqrt(N)
    lr_warmup_updates: int = 0  # updates over which the scaled learning rate ramps up linearly
    # Linear decay of the step size, to learning_rate_end (times the rank scale, if any) after lr_decay_updates
    # updates; None: a constant step size.
    learning_rate_end: Optional[float] = None
    lr_decay_updates: int = 0
    # ... and with N such ranks, divide the schedules counted in updates (target_update_period, lr_warmup_updates,
    # lr_decay_updates) by N, so each spans the env steps it spans at one rank.
    scale_schedules_by_workers: bool = True


@dataclasses.dataclass(frozen=True)
class Performance:
    """How fast a rank runs; what it learns is the same (but for the rounding of mixed precision and XLA). A group
    of TrainConfig, read as the config's own (`config.pipeline`)."""

    # Acting runs ahead of learning on a thread of its own (hvd_dqn.run.pipeline), by at most pipeline_lead_env_steps
    # (the job's env steps; -1: enough to act on through two updates), with the learner's weights copied to it
    # after every pipeline_sync_updates updates. Same replay ratio and memory as in order; reproducible.
    # "auto": on for emulators that step outside Python's interpreter lock (Atari); Python envs step in order.
    pipeline: str = "auto"
    pipeline_lead_env_steps: int = -1
    pipeline_sync_updates: int = 4
    # The next minibatch drawn from replay on a thread of its own while the current update and its allreduce run,
    # across env steps too (hvd_dqn.agent.dqn.agent); "auto": on where the rank's update runs on a GPU.
    draw_ahead: str = "auto"
    fp16_allreduce: bool = False  # gradients allreduced as float16 (hvd.Compression.fp16)
    xla: bool = False  # the networks' passes compiled by XLA (jit_compile)
    mixed_precision: bool = False  # Keras mixed_float16 with dynamic loss scaling
    intra_op_threads: int = 0  # 0: the CPUs this process may use divided by its host's ranks (or --cores_per_rank)
    cores_per_rank: int = 0  # each rank bound to its own block of this many cores; 0: no binding
    inter_op_threads: int = 1
    deterministic_ops: bool = False  # tf.config.experimental.enable_op_determinism: slower, repeatable


# TrainConfig's groups of settings, by field name: each group's settings read, change and flag as the config's own.
GROUPS = {"atari": AtariProtocol, "optimization": Optimization, "performance": Performance}
_GROUP_OF = {field.name: group for group, kind in GROUPS.items() for field in dataclasses.fields(kind)}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run: what every agent reads, in fields and three groups of fields (`GROUPS`:
    the Atari protocol, the optimizer, performance), and the agent's own settings (`agent_settings`). Every setting
    reads as the config's own (`config.noop_max`, `config.batch_size`), is changed by `replace` and is a flag of
    `hvd_dqn.flags` of its name."""

    # The agent, by its name in the registry (hvd_dqn.agent.registry): "dqn", "qrdqn", "iqn", "c51", "mdqn" (a
    # replay memory and a target network) or "pqn" (rollouts); its settings, the replay memory's and target
    # network's among them, are `agent_settings`. Another agent's setting, given or changed from its default, is
    # refused.
    agent: str = "dqn"

    # Environment.
    env_id: str = "CartPole-v1"
    # environments of the job, split over the ranks (see counts_per_rank), stepped as one vectorised env
    num_envs: int = 4
    seed: int = 0  # rank r seeds its envs and RNGs with seed + r
    atari: AtariProtocol = dataclasses.field(default_factory=AtariProtocol)

    # Run length, in env steps summed over ranks.
    total_env_steps: int = 100_000

    # Exploration (epsilon-greedy), linear from start to end over decay steps (env steps summed over ranks).
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_decay_env_steps: int = 50_000
    epsilon_decay_start_env_steps: int = 0  # epsilon stays at start until here (Dopamine: min_replay_history)

    # Learning.
    gamma: float = 0.99
    optimization: Optimization = dataclasses.field(default_factory=Optimization)
    hidden_sizes: Tuple[int, ...] = (256, 256)
    network: str = "auto"  # auto: Nature CNN for stacked Atari frames, MinAtar's CNN for its grids, else MLP
    conv_padding: str = "valid"  # Nature CNN: "valid" (Mnih et al. 2015) or "same" (Dopamine's JAX/Flax default)
    # num_envs and the replay memory's replay_capacity and learning_starts count over the job and are split over
    # the ranks (so a preset means the same run at any N), unless this is set (or --elastic, whose world changes
    # size): then each rank has its own. Configs written before this field existed meant "per rank" under batch.
    counts_per_rank: bool = False

    # Logging, evaluation, checkpoints.
    logdir: str = "runs/cartpole"
    log_interval_env_steps: int = 5_000
    eval_interval_env_steps: int = 10_000  # 0 disables evaluation during training
    eval_episodes: int = 20  # split over ranks
    eval_epsilon: float = 0.0
    stop_at_eval_return: Optional[float] = None  # stop training once evaluation reaches this mean return
    stop_consecutive_evals: int = 1  # ... in this many evaluations in a row
    # Stop once the mean return of the last stop_train_episodes training episodes (as played, over all ranks)
    # reaches this: gymnasium's "solved" (CartPole-v1: 475 over 100 consecutive episodes).
    stop_at_train_return: Optional[float] = None
    stop_train_episodes: int = 100
    checkpoint_interval_env_steps: int = 25_000  # 0: only the final checkpoint
    keep_checkpoints: int = 3
    checkpoint_replay: bool = False  # each rank also saves its replay memory (needs a logdir all ranks share)
    resume: bool = False
    auto_resume: bool = False  # resume if --logdir holds a checkpoint, else start fresh (restartable jobs)

    # Fault tolerance (Horovod Elastic).
    elastic: bool = False  # run the loop under hvd.elastic.run: survive lost workers, take in new ones
    elastic_commit_env_steps: int = 5_000  # env steps (summed over ranks) between two elastic commits

    performance: Performance = dataclasses.field(default_factory=Performance)


    # The settings of the agent's own (hvd_dqn.settings.AgentSettings, of the class its registry entry names: the
    # DQN family's replay memory and target network, QR-DQN's quantiles, PQN's rollout), read as the config's own:
    # `config.batch_size` is `config.agent_settings.batch_size`. A config is made with them by
    # hvd_dqn.agent.configs.make_config (or the flags); one made here without them has the shared settings only.
    agent_settings: Optional[AgentSettings] = None

    def __getattr__(self, name: str):
        # Called only for a name that is not a field of the config: a setting of one of its groups or of its agent.
        if name.startswith("__"):
            raise AttributeError(name)
        group = _GROUP_OF.get(name)
        if group is not None:
            return getattr(self.__dict__[group], name)
        settings = self.__dict__.get("agent_settings")
        if settings is not None and hasattr(settings, name):
            return getattr(settings, name)
        raise AttributeError(f"{name!r}: not a setting of --agent={self.__dict__.get('agent')} (TrainConfig)")

    @classmethod
    def setting_fields(cls) -> Tuple[dataclasses.Field, ...]:
        """The fields of every setting every agent's config has, its groups' among them, as flags name them."""
        fields = []
        for field in dataclasses.fields(cls):
            if field.name in GROUPS:
                fields += dataclasses.fields(GROUPS[field.name])
            elif field.name != "agent_settings":
                fields.append(field)
        return tuple(fields)

    def setting_values(self) -> Dict[str, Any]:
        """name -> value of every setting, the agent's own with the config's, as flags and config.json name them."""
        values = {field.name: getattr(self, field.name) for field in self.setting_fields()}
        if self.agent_settings is not None:
            values.update(self.agent_settings.values())
        return values

    def replace(self, **changes) -> "TrainConfig":
        """The config with `changes` (flag names: the config's own settings, its groups' or its agent's; the agent
        stays: to change it, hvd_dqn.agent.configs.with_settings). A name that is none of these is a TypeError, as
        for dataclasses.replace."""
        if "agent" in changes and changes["agent"] != self.agent:
            raise TypeError("TrainConfig.replace keeps the agent; use hvd_dqn.agent.configs.with_settings")
        own = {field.name for field in dataclasses.fields(self)}
        by_group: Dict[str, Dict[str, Any]] = {}
        agents = {}
        for name in [name for name in changes if name not in own]:
            if name in _GROUP_OF:
                by_group.setdefault(_GROUP_OF[name], {})[name] = changes.pop(name)
            else:
                agents[name] = changes.pop(name)
        for group, values in by_group.items():
            changes[group] = dataclasses.replace(getattr(self, group), **values)
        if agents:
            if self.agent_settings is None:
                raise TypeError(f"{sorted(agents)[0]!r}: not a setting of a config without its agent's settings")
            changes["agent_settings"] = dataclasses.replace(self.agent_settings, **agents)
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(self.setting_values(), indent=2, sort_keys=True)

    @classmethod
    def from_values(cls, raw: Mapping[str, Any], settings_class) -> "TrainConfig":
        """A config from flat settings (flag names) and the agent's settings class: the settings neither knows are
        ignored (config.json of another version, another agent's settings that runs written before the agents had
        settings of their own held), those missing take their defaults."""
        own = {field.name for field in dataclasses.fields(settings_class)}
        settings = settings_class(**{key: value for key, value in raw.items() if key in own})
        known = {field.name for field in cls.setting_fields()}
        values = {key: value for key, value in raw.items() if key in known}
        if "hidden_sizes" in values:
            values["hidden_sizes"] = tuple(values["hidden_sizes"])
        return cls(agent=values.pop("agent", cls.agent), agent_settings=settings).replace(**values)

    @staticmethod
    def json_values(text: str) -> Dict[str, Any]:
        """The flat settings of a config.json written by `to_json` of this or an earlier version, with the
        settings it was written without at the values that version ran with."""
        values = json.loads(text)
        # Written before rank_scaling existed: each rank updated on its own envs and memory, which is "batch".
        values.setdefault("rank_scaling", "batch")
        # Written before these defaults turned on (version 0.1.3): the scaling rules were off, and under batch each
        # rank had its own --num_envs, --replay_capacity and --learning_starts.
        values.setdefault("scale_lr_by_workers", False)
        values.setdefault("scale_schedules_by_workers", False)
        values.setdefault("counts_per_rank", values["rank_scaling"] == "batch")
        return values


def _require(condition: bool, flag: str, value, allowed: str) -> None:
    if not condition:
        raise ConfigError(f"--{flag}={value}: {allowed}")


def validate_shared(config: TrainConfig, check_logdir_writable: bool = True) -> TrainConfig:
    """Raises ConfigError for the first invalid setting of those every agent's config has; returns the config
    unchanged otherwise. hvd_dqn.agent.configs.validate checks the agent's settings first, then these.

    `check_logdir_writable` is true only on the rank that writes (rank 0): it creates the log folder if
    needed and proves it can write there, so a bad path fails before any training time is spent.
    """
    positive_ints = (
        "num_envs", "total_env_steps", "log_interval_env_steps", "eval_episodes", "keep_checkpoints",
        "inter_op_threads", "elastic_commit_env_steps", "pipeline_sync_updates",
    )
    for name in positive_ints:
        value = getattr(config, name)
        _require(isinstance(value, int) and value > 0, name, value, "must be a positive integer")
    non_negative_ints = (
        "epsilon_decay_env_steps", "epsilon_decay_start_env_steps", "lr_warmup_updates", "lr_decay_updates",
        "eval_interval_env_steps", "checkpoint_interval_env_steps", "intra_op_threads", "cores_per_rank",
    )
    for name in non_negative_ints:
        value = getattr(config, name)
        _require(isinstance(value, int) and value >= 0, name, value, "must be an integer >= 0")
    for name in ("epsilon_start", "epsilon_end", "eval_epsilon"):
        value = getattr(config, name)
        _require(0.0 <= value <= 1.0, name, value, "must be a probability in [0, 1]")
    _require(0.0 <= config.repeat_action_probability <= 1.0, "repeat_action_probability",
             config.repeat_action_probability, "must be a probability in [0, 1]")
    for name in ("noop_max", "env_threads"):
        value = getattr(config, name)
        _require(isinstance(value, int) and value >= 0, name, value, "must be an integer >= 0")
    _require(isinstance(config.pipeline_lead_env_steps, int) and config.pipeline_lead_env_steps >= -1,
             "pipeline_lead_env_steps", config.pipeline_lead_env_steps,
             "must be an integer >= 0 (env steps of the job), or -1 for two updates' worth")
    _require(config.max_episode_frames > 0, "max_episode_frames", config.max_episode_frames,
             "must be a positive integer")
    _require(0.0 <= config.gamma <= 1.0, "gamma", config.gamma, "must be a discount factor in [0, 1]")
    for name in ("learning_rate", "adam_epsilon"):
        value = getattr(config, name)
        _require(value > 0.0, name, value, "must be a number > 0")
    choices = (("network", NETWORKS), ("conv_padding", CONV_PADDINGS), ("optimizer", OPTIMIZERS),
               ("lr_scale_rule", LR_SCALE_RULES),
               ("pipeline", PIPELINE_MODES), ("draw_ahead", DRAW_AHEAD_MODES))
    for name, allowed in choices:
        value = getattr(config, name)
        _require(value in allowed, name, value, f"must be one of {', '.join(allowed)}")
    if config.learning_rate_end is not None:
        _require(config.learning_rate_end >= 0.0, "learning_rate_end", config.learning_rate_end,
                 "must be a number >= 0")
        _require(config.lr_decay_updates > 0, "learning_rate_end", config.learning_rate_end,
                 "needs --lr_decay_updates > 0 (the updates over which the step size decays to it)")
    else:
        _require(config.lr_decay_updates == 0, "lr_decay_updates", config.lr_decay_updates,
                 "needs --learning_rate_end (the step size to decay to)")
    _require(0.0 <= config.rmsprop_rho < 1.0, "rmsprop_rho", config.rmsprop_rho, "must be in [0, 1)")
    _require(config.rmsprop_epsilon > 0.0, "rmsprop_epsilon", config.rmsprop_epsilon, "must be a number > 0")
    _require(config.max_grad_norm >= 0.0, "max_grad_norm", config.max_grad_norm,
             "must be >= 0 (0 disables gradient clipping)")
    _require(len(config.hidden_sizes) > 0 and all(size > 0 for size in config.hidden_sizes),
             "hidden_sizes", ",".join(map(str, config.hidden_sizes)),
             "must be a comma-separated list of positive layer widths, e.g. 256,256")
    _require(config.seed >= 0, "seed", config.seed, "must be an integer >= 0")
    _require(config.stop_consecutive_evals >= 1, "stop_consecutive_evals", config.stop_consecutive_evals,
             "must be a positive number of evaluations")
    _require(config.stop_train_episodes >= 1, "stop_train_episodes", config.stop_train_episodes,
             "must be a positive number of episodes")
    _check_env_id(config.env_id)
    # Nothing to resume in a folder that does not exist: said before the folder would be created for the run.
    if config.resume and config.logdir and not storage.is_remote(config.logdir) and not os.path.isdir(config.logdir):
        raise ConfigError(f"--resume: --logdir={config.logdir} does not exist, so it holds no run to continue; leave "
                          "--resume out to start one there (or --auto_resume: continue if it holds one, else start)")
    if check_logdir_writable:
        _check_writable_dir(config.logdir)
    return config


def _check_env_id(env_id: str) -> None:
    import difflib

    import gymnasium
    from ale_py.roms import get_all_rom_ids

    from hvd_dqn.envs import MINATAR_PREFIX, MissingExtraError, atari_game, register_minatar_envs

    if env_id.startswith(MINATAR_PREFIX):
        try:
            register_minatar_envs()
        except MissingExtraError as error:
            raise ConfigError(f"--env_id={env_id}: {error}") from None
    registered = sorted(gymnasium.envs.registry.keys())
    if env_id in registered or atari_game(env_id) is not None:
        return
    close = difflib.get_close_matches(env_id, registered + sorted(get_all_rom_ids()), n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigError(
        f"--env_id={env_id}: unknown environment id; {hint}"
        "list the valid ids with: python -c 'import gymnasium; gymnasium.pprint_registry()' "
        "(classic control) or python -c 'import ale_py.roms; print(ale_py.roms.get_all_rom_ids())' (Atari)"
    )


def _check_writable_dir(path: str) -> None:
    if not path:
        raise ConfigError("--logdir=: must name a folder to write checkpoints and metrics to")
    if storage.is_remote(path):
        try:
            storage.check_writable(path)
        except storage.StorageError as error:
            raise ConfigError(f"--logdir={error}") from None
        return
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write_probe_{os.getpid()}")
        with open(probe, "w") as handle:
            handle.write("ok")
        os.remove(probe)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(f"--logdir={path}: not a writable folder ({reason})") from None
