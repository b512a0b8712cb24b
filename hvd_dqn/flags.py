"""Command-line flags of `hvd_dqn.train`, defined once, and their conversion into a `TrainConfig`.

Every flag's default comes from `TrainConfig`, so the two cannot drift apart; each help text gives the
unit. Only the entry points import this module; `config_from_flags` turns the parsed values into the
validated config the rest of the package receives.
"""
from __future__ import annotations

from absl import flags

from hvd_dqn.cli import flag_error_text
from hvd_dqn.config import ConfigError, TrainConfig

# name -> help text (with units) of every setting of TrainConfig; an agent's own settings have theirs beside them
# (hvd_dqn.settings.setting). The flag's type follows the default's type.
_HELP = {
    "env_id": "Gymnasium environment id, e.g. CartPole-v1.",
    "num_envs": "Environments of the job, split evenly over the ranks (each rank steps its share as one "
                "vectorised env); with --counts_per_rank or --elastic, each rank's own.",
    "seed": "Base random seed; rank r seeds its environments and exploration with seed + r.",
    "repeat_action_probability": "Atari: probability that the emulator repeats the previous action (sticky actions; "
                                 "0.25 in the current ALE protocol, Machado et al. 2018).",
    "full_action_space": "Atari: use all 18 actions instead of the game's minimal set.",
    "noop_max": "Atari: at most this many no-op actions at the start of each episode.",
    "fire_reset": "Atari: press FIRE when an episode starts in games that need it to begin (ale-py's "
                  "use_fire_reset). Dopamine's protocol leaves it off: the agent must learn to press FIRE.",
    "max_episode_frames": "Atari: emulator frames after which an episode is truncated (bootstrapped, not terminal).",
    "env_threads": "Atari: emulator threads per rank; 0: --cores_per_rank, else the rank's share of the CPUs its "
                   "process may use (its affinity mask and its cgroup's CPU quota, divided by the ranks on its host; "
                   "under srun, its --cpus-per-task).",
    "terminal_on_life_loss": "Atari: treat a lost life as terminal for learning (Mnih et al. 2015); episodes "
                             "and reported scores still run to game over.",
    "clip_rewards": "Learn from sign(reward) (Mnih et al. 2015); reported returns stay the raw game score.",
    "total_env_steps": "Length of training in env steps, summed over all envs of all ranks.",
    "epsilon_start": "Exploration probability at the first env step.",
    "epsilon_end": "Exploration probability after the decay.",
    "epsilon_decay_env_steps": "Env steps (summed over ranks) over which epsilon falls linearly from start to end.",
    "epsilon_decay_start_env_steps": "Env steps (summed over ranks) during which epsilon stays at its start value "
                                     "before the decay begins (Dopamine waits for min_replay_history = 20k).",
    "gamma": "Discount factor per env step.",
    "learning_rate": "Optimizer learning rate (per update, before any scaling by the number of ranks).",
    "adam_epsilon": "Adam's and RAdam's epsilon (numerical stabiliser).",
    "max_grad_norm": "Clip the global norm of the averaged gradient to this value; 0 disables clipping.",
    "hidden_sizes": "Widths of the Q-network's hidden layers, comma-separated.",
    "network": "Q-network: auto (the Nature CNN for stacked Atari frames, MinAtar's one-convolution CNN for its "
               "10x10 grids, an MLP of --hidden_sizes otherwise), or one of mlp, nature_cnn, minatar_cnn.",
    "conv_padding": "Nature CNN convolutions: valid (Mnih et al. 2015: 7x7x64 = 3,136 features, 1.69M parameters "
                    "for 6 actions) or same (Flax's default, so Dopamine's JAX agents: 11x11x64 = 7,744 features, "
                    "4.05M parameters; about 1.8 times the update time on a CPU).",
    "optimizer": "adam (with --adam_epsilon), radam (Liu et al. 2020's rectified Adam, PQN's optimizer; with "
                 "--adam_epsilon) or rmsprop (with --rmsprop_rho, --rmsprop_epsilon, --rmsprop_centered; MinAtar's "
                 "DQN: centred RMSprop).",
    "rmsprop_rho": "RMSprop: decay rate of the average of squared gradients (PyTorch's alpha; MinAtar: 0.95).",
    "rmsprop_epsilon": "RMSprop: added to the square root of the second moment, as PyTorch's RMSprop does "
                       "(MinAtar: 0.01); Keras' own RMSprop adds it inside the root instead.",
    "rmsprop_centered": "RMSprop: centred (divide by the gradient's estimated standard deviation, not its RMS).",
    "layer_adaptation": "Layer-wise adaptive step sizes: the optimizer's step of each variable (a layer's kernel "
                        "or bias) rescaled to --learning_rate times the variable's norm, LAMB's trust ratio (You et "
                        "al. 2019); with --optimizer=adam this is LAMB. Made for large global batches.",
    "lr_scale_rule": "With --scale_lr_by_workers: linear (the rate times N, Goyal et al. 2017) or sqrt (times "
                     "sqrt(N), Krizhevsky 2014; Hoffer et al. 2017).",
    "scale_lr_by_workers": "Under --rank_scaling=batch (PQN: --pqn_minibatches=whole): multiply the learning rate "
                           "by the number of ranks (the global batch grows with them; Goyal et al. 2017). No "
                           "effect under updates (PQN: shared).",
    "lr_warmup_updates": "Updates over which a scaled learning rate ramps up linearly from the base value; 0: none.",
    "learning_rate_end": "Decay the step size linearly from --learning_rate to this value over --lr_decay_updates "
                         "updates, then keep it (both times the rank scale of --scale_lr_by_workers); unset: "
                         "a constant step size.",
    "lr_decay_updates": "Updates over which the step size decays to --learning_rate_end; 0 without it.",
    "scale_schedules_by_workers": "With --rank_scaling=batch (PQN: --pqn_minibatches=whole) and N ranks: divide "
                                  "--target_update_period, --lr_warmup_updates and --lr_decay_updates by N "
                                  "(rounded, at least 1), so each spans the env steps it spans at one rank although "
                                  "N ranks make N times fewer updates per env step (Goyal et al. 2017 keep schedules "
                                  "in epochs alike). No effect under updates or --elastic (whose N changes while a "
                                  "schedule runs).",
    "counts_per_rank": "--num_envs, --replay_capacity and --learning_starts count per rank instead of over the job "
                       "(N ranks then run N times the envs and memory; always so under --elastic). Runs written "
                       "before these counted over the job under --rank_scaling=batch resume with it set.",
    "logdir": "Folder for checkpoints, metrics.csv, TensorBoard events and config.json (written by rank 0).",
    "log_interval_env_steps": "Env steps (summed over ranks) between two progress lines / metrics rows.",
    "eval_interval_env_steps": "Env steps (summed over ranks) between greedy evaluations during training; 0: never.",
    "eval_episodes": "Episodes per evaluation, split over the ranks.",
    "eval_epsilon": "Exploration probability during evaluation (0 is greedy).",
    "stop_at_eval_return": "Stop training (and checkpoint) once an evaluation's mean return reaches this value.",
    "stop_consecutive_evals": "How many evaluations in a row must reach --stop_at_eval_return before training stops.",
    "stop_at_train_return": "Stop training (and checkpoint) once the mean return of the last --stop_train_episodes "
                            "training episodes, as played (exploration included) and over all ranks, reaches this "
                            "value: gymnasium's 'solved' (CartPole-v1: 475 over 100). Checked at each log point.",
    "stop_train_episodes": "Consecutive training episodes averaged for --stop_at_train_return.",
    "checkpoint_interval_env_steps": "Env steps (summed over ranks) between two checkpoints; 0: only at the end.",
    "keep_checkpoints": "Most recent checkpoints to keep.",
    "checkpoint_replay": "Each rank also writes its replay memory into every checkpoint (one compressed shard per "
                         "rank; about 0.5-1 GB per million Atari transitions), so --resume continues with full "
                         "memories. --logdir must be on a file system every rank can write.",
    "resume": "Continue from the latest checkpoint in --logdir (error if there is none). Without it (or "
              "--auto_resume) a --logdir that already holds checkpoints is refused rather than overwritten.",
    "auto_resume": "Continue from the latest checkpoint in --logdir if it holds one, else start a fresh run: the "
                   "same command line for the first start and every restart of a job a scheduler may restart "
                   "(Kubernetes pods, Slurm --requeue).",
    "elastic": "Run under Horovod Elastic (start with horovodrun --min-np/--max-np --host-discovery-script, "
               "over Gloo): when a worker is lost the others roll back to the last commit and go on; a "
               "worker that joins receives the weights and fills its own replay memory.",
    "elastic_commit_env_steps": "With --elastic: env steps (summed over ranks) between two commits of the "
                                "training state in memory, the point a lost worker rolls the others back to.",
    "pipeline": "on: acting (inference on a copy of the Q-network, the emulators, epsilon-greedy) runs ahead of "
                "learning on a thread of its own, handing its steps to the learner through a bounded queue. "
                "The replay ratio, the memory and every minibatch are those of acting in order; actions come "
                "from weights a few updates older. Runs repeat exactly for a given seed. off: acting in order. "
                "auto: on for Atari, whose emulators step outside Python's interpreter lock; classic-control "
                "and MinAtar envs step in Python, where a thread of their own measured no gain.",
    "pipeline_lead_env_steps": "With the pipeline on: how far acting may run ahead of learning, in env steps of the "
                               "job (rounded up to whole steps of every env); 0 acts in order with learning. "
                               "-1: enough to act on through two updates.",
    "draw_ahead": "on: the next minibatch is drawn from the replay memory on a thread of its own while the current "
                  "update and its gradient allreduce run, including, where every env step makes an update due, "
                  "the first minibatch of the next step (drawn before that step is stored: one step older). It "
                  "pays where the update runs on a GPU and the draw on the host's cores. Runs repeat exactly and "
                  "resume exactly. off: each env step's first minibatch is drawn after the step is stored. auto: "
                  "on where the rank's update runs on a GPU, with uniform replay (prioritised replay cannot draw "
                  "ahead).",
    "pipeline_sync_updates": "With the pipeline on: the learner's weights are copied to the acting thread after every "
                             "this many updates (at fixed points, so runs repeat).",
    "fp16_allreduce": "Send gradients through the allreduce as float16 (Horovod's fp16 compression): half the "
                      "bytes between ranks, which pays where the network between hosts is the bottleneck; "
                      "they are averaged and applied in float32.",
    "xla": "Compile the Q-networks' forward and backward passes with XLA (jit_compile); meant for GPUs, where "
           "fused kernels save time (on this project's CPU runs it was slower). The gradient allreduce stays "
           "outside XLA.",
    "mixed_precision": "Keras mixed_float16: the networks compute in float16 (weights and Q-values stay float32) "
                       "with dynamic loss scaling; for GPUs with tensor cores (on CPUs it is slow).",
    "intra_op_threads": "TensorFlow threads inside one op; 0: --cores_per_rank, else the rank's share of the CPUs "
                        "its process may use (its affinity mask and its cgroup's CPU quota, divided by the ranks on "
                        "its host; under srun, its --cpus-per-task).",
    "cores_per_rank": "Bind each rank, with all its threads, to cores of its own: local rank r takes the r-th "
                      "block of this many of the cores the process may use (a rank the launcher already bound to "
                      "that many keeps them); TensorFlow's and the emulators' threads default to that many. The "
                      "world line of the log names each rank's cores. 0: no binding (the launcher's, if any).",
    "inter_op_threads": "TensorFlow ops run in parallel (a pipeline adds one, for its acting thread's inference).",
    "deterministic_ops": "Make TensorFlow ops deterministic (repeatable runs at some cost in speed).",
}


# What `python -m hvd_dqn.train --help` lists: the flags a user sets, by task. Everything else (the network and
# optimizer details, schedules, the Atari protocol, speed switches, the ways of counting and binding that the
# measuring tools use) has a preset's value and is listed by --helpfull.
USER_FLAGS = (
    ("Task and budget", ("env_id", "total_env_steps", "num_envs", "seed")),
    ("Algorithm", ("agent", "double_dqn", "dueling", "prioritized_replay", "n_step", "learning_rate",
                   "batch_size", "replay_capacity")),
    ("Scaling over ranks", ("rank_scaling", "elastic", "fp16_allreduce")),
    ("Outputs, stopping and resuming", ("logdir", "checkpoint_interval_env_steps", "checkpoint_replay", "resume",
                                        "auto_resume", "stop_at_train_return", "eval_interval_env_steps")),
)


def short_help(flag_values: flags.FlagValues = flags.FLAGS, width: int = 100) -> str:
    """The --help text of hvd_dqn.train: the usage line, then USER_FLAGS by task with each flag's help and default."""
    import textwrap

    lines = ["Data-parallel DQN training with Horovod and TensorFlow-Keras.", "",
             "  horovodrun -np N python -m hvd_dqn.train --flagfile=configs/cartpole.flags [--flag=value ...]", "",
             "--flagfile=FILE reads a preset (configs/*.flags); flags given after it override it. Env steps count",
             "over all envs of all ranks; see docs/training.md and docs/scaling.md.", ""]
    for group, names in USER_FLAGS:
        lines.append(f"{group}:")
        for name in names:
            flag = flag_values[name]
            default = ",".join(flag.default) if isinstance(flag.default, list) else flag.default
            text = f"--{name}: {flag.help} (default: {default})"
            lines += textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="      ")
        lines.append("")
    shown = sum(len(names) for _, names in USER_FLAGS)
    total = len(setting_names())
    lines += textwrap.wrap(f"These are {shown} of hvd_dqn.train's {total} flags; --helpfull lists them all (network, "
                           "optimizer, schedules, Atari protocol, evaluation, speed switches).", width)
    return "\n".join(lines)


def agent_help() -> str:
    """--agent's help: every registered agent with its line, and the rule that settles whose settings are whose."""
    from hvd_dqn.agent import registry

    agents = " ".join(f"{entry.name}: {entry.summary}" for entry in registry.entries())
    return (f"The algorithm. {agents} A setting that only other agents read is refused, whatever its value.")


def flag_help(name: str) -> str:
    """The help of flag `name`: this module's, or --agent's from the registry."""
    if name == "agent":
        return agent_help()
    if name not in _HELP:  # every setting has a help text: a new one without is a mistake to catch at once
        raise KeyError(f"no help text for the setting {name}: add it to hvd_dqn.flags._HELP")
    return _HELP[name]


def setting_names():
    """The names of every flag of a setting: TrainConfig's, then the registered agents' own (a plugin's too)."""
    from hvd_dqn.agent import registry
    from hvd_dqn.agent.configs import shared_setting_names

    return shared_setting_names() + tuple(registry.agent_setting_fields())


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines one absl flag per setting in `flag_values`: every setting of TrainConfig and its groups, then every
    setting of every registered agent's settings class (hvd_dqn.settings), with its help text and the agents that
    read it. Safe to call more than once."""
    from hvd_dqn.agent import registry
    from hvd_dqn.settings import flag_type, help_text
    from hvd_dqn.text import listed

    for field in TrainConfig.setting_fields():
        if field.name not in flag_values:
            # an optional number (Optional[float]) whose default None is unset
            kind = float if field.default is None and "float" in str(field.type) else type(field.default)
            _define(flag_values, field.name, field.default, kind, flag_help(field.name))
    for name, (field, owners) in registry.agent_setting_fields().items():
        if name not in flag_values:
            agents = listed([f"--agent={owner.name}" for owner in owners])
            _define(flag_values, name, field.default, flag_type(field), f"{help_text(field)} [{agents}]")


def _define(flag_values, name: str, default, kind: type, help_text: str) -> None:
    if kind is bool:
        flags.DEFINE_bool(name, default, help_text, flag_values=flag_values)
    elif kind is int:
        flags.DEFINE_integer(name, default, help_text, flag_values=flag_values)
    elif kind is float:
        flags.DEFINE_float(name, default, help_text, flag_values=flag_values)
    elif kind is tuple:
        flags.DEFINE_list(name, [str(size) for size in default], help_text, flag_values=flag_values)
    else:
        flags.DEFINE_string(name, default, help_text, flag_values=flag_values)


def given_settings(flag_values=flags.FLAGS) -> frozenset:
    """The settings named on the command line or in a flagfile, whatever their values."""
    return frozenset(name for name in setting_names() if flag_values[name].present)


def config_from_flags(flag_values=flags.FLAGS, check_logdir_writable: bool = True) -> TrainConfig:
    """Builds and validates the config from parsed flags; raises ConfigError naming the bad flag. The agent's own
    settings not given take its settings class's defaults; another agent's, given, are refused."""
    from hvd_dqn.agent.configs import make_config, shared_setting_names, validate

    given = given_settings(flag_values)
    values = {name: flag_values[name].value for name in shared_setting_names()}
    try:
        values["hidden_sizes"] = tuple(int(size) for size in values["hidden_sizes"])
    except ValueError:
        raise ConfigError(f"--hidden_sizes={','.join(values['hidden_sizes'])}: must be a comma-separated list of "
                          "positive layer widths, e.g. 256,256") from None
    values.update({name: flag_values[name].value for name in setting_names()
                   if name not in values and (name in given)})
    return validate(make_config(**values), check_logdir_writable=check_logdir_writable, given=given)


def config_of_runs(program: str, flagfile: str, run_flags) -> TrainConfig:
    """The config `hvd_dqn.train --flagfile=FLAGFILE RUN_FLAGS...` would train with, parsed apart from this
    process's own flags: tools that start training runs (the scaling study, the worker benchmark) check their
    runs' flags with it before any run starts. Raises ConfigError naming a bad flag."""
    return config_and_given_of_runs(program, flagfile, run_flags)[0]


def config_and_given_of_runs(program: str, flagfile: str, run_flags):
    """`config_of_runs`'s config and the settings the flagfile and RUN_FLAGS name (`given_settings`)."""
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    try:
        flag_values([program, f"--flagfile={flagfile}", *run_flags])
    except flags.Error as error:
        raise ConfigError(flag_error_text(error)) from None
    return config_from_flags(flag_values, check_logdir_writable=False), given_settings(flag_values)


def split_run_flags(argv):
    """(a tool's own arguments, the flags after "--" that go to every run of hvd_dqn.train)."""
    argv = list(argv)
    return (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
