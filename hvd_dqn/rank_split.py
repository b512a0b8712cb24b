"""How a job's configuration divides over N ranks.

Counts in a TrainConfig are the job's (env steps, envs, replay, the learning start), unless --counts_per_rank
or --elastic makes the last three each rank's own. These functions give one rank's share of them at a world
size, which rules scale with the ranks (the step size, the schedules counted in updates), and why a world size
cannot run a config; the trainer asks them at start-up, the measuring commands before they start any run.
docs/scaling.md, "Units and the number of ranks", explains the choices.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from hvd_dqn.config import ConfigError, TrainConfig


def learns_from_replay(config: TrainConfig) -> bool:
    """Whether the config's agent learns from replay memories (the DQN family), as its settings class says
    (hvd_dqn.settings.AgentSettings.memory), rather than from rollouts (PQN)."""
    return _settings(config).memory == "replay"


def _settings(config: TrainConfig):
    if config.agent_settings is None:
        raise ValueError("a config without its agent's settings (TrainConfig.agent_settings): make it with "
                         "hvd_dqn.agent.configs.make_config")
    return config.agent_settings


def scales_lr(config: TrainConfig) -> bool:
    """Whether the step size is multiplied by the ranks: --scale_lr_by_workers applies where the global batch grows
    with the ranks (the agent's settings say: `AgentSettings.update_grows_with_ranks`; the DQN family's
    --rank_scaling=batch, PQN's --pqn_minibatches=whole); under updates the global batch is --batch_size at any N,
    and so is PQN's shared minibatch (a --num_minibatches-th of the job's rollout)."""
    return config.scale_lr_by_workers and _settings(config).update_grows_with_ranks()


def scales_schedules(config: TrainConfig) -> bool:
    """Whether the schedules counted in updates are divided by the ranks: --scale_schedules_by_workers applies
    where N ranks make N times fewer updates per env step (`update_grows_with_ranks`: --rank_scaling=batch, PQN's
    --pqn_minibatches=whole; updates makes one rank's updates per env step at any N) and not under --elastic
    (whose N changes while a schedule runs)."""
    return config.scale_schedules_by_workers and _settings(config).update_grows_with_ranks() and not config.elastic


@dataclasses.dataclass(frozen=True)
class UpdateCountedSchedules:
    """The schedules counted in updates, as this world runs them (`update_counted_schedules`)."""
    target_update_period: int
    lr_warmup_updates: int
    lr_decay_updates: int


def update_counted_schedules(config: TrainConfig, world_size: int) -> UpdateCountedSchedules:
    """The config's schedules counted in updates; with --scale_schedules_by_workers (--rank_scaling=batch),
    divided by the number of ranks, rounded half up and at least 1 where not 0.

    Under --rank_scaling=batch N ranks make N times fewer updates per env step, so a target network copied
    every K updates is copied every N times as many env steps, and a step size decaying over K updates decays
    over N times as many env steps: besides the N times larger batch, the run learns on another clock.
    Dividing by N keeps each schedule on one rank's env-step clock, as Goyal et al. (2017) keep their
    warm-up and decay in epochs while the batch grows."""
    divisor = world_size if scales_schedules(config) else 1

    def on_this_world(updates: int) -> int:
        return 0 if updates == 0 else max(1, int(updates / divisor + 0.5))

    return UpdateCountedSchedules(on_this_world(_settings(config).target_period()),
                                  on_this_world(config.lr_warmup_updates),
                                  on_this_world(config.lr_decay_updates))


def learning_rate_scale(world_size: int, rule: str = "linear") -> float:
    """The factor on the learning rate for `world_size` ranks: N (linear; Goyal et al. 2017: the rate grows
    with the batch) or sqrt(N) (the gradient noise falls as 1/sqrt(batch); Krizhevsky 2014, Hoffer et al.
    2017)."""
    if rule == "linear":
        return float(world_size)
    if rule == "sqrt":
        return math.sqrt(world_size)
    raise ValueError(f"unknown learning-rate scale rule {rule!r}; expected linear or sqrt")


@dataclasses.dataclass(frozen=True)
class LearningRateAtRanks:
    """The step size a rank of a job trains with (`learning_rate_at`): `base` times `scale`, reached from `base`
    over `warmup_updates` updates, the whole decaying linearly to `end_fraction` of itself over `decay_updates`.
    `follows_world`: the scale is the ranks', which a world that changes size (--elastic) must follow."""
    base: float
    scale: float = 1.0
    warmup_updates: int = 0
    end_fraction: float = 1.0
    decay_updates: int = 0
    follows_world: bool = False

    @property
    def constant(self) -> bool:
        return not self.follows_world and self.decay_updates == 0


def learning_rate_at(config: TrainConfig, world_size: int) -> LearningRateAtRanks:
    """The one rule for the step size at `world_size` ranks: --learning_rate, times the ranks (--lr_scale_rule)
    where `scales_lr` says so and there is more than one rank (or the world may change: --elastic), warmed up over
    --lr_warmup_updates; and decaying to --learning_rate_end over --lr_decay_updates if that is set. The two
    update counts are on this world's clock (`update_counted_schedules`)."""
    schedules = update_counted_schedules(config, world_size)
    scaled = scales_lr(config) and (world_size > 1 or config.elastic)
    decaying = config.learning_rate_end is not None
    return LearningRateAtRanks(
        base=config.learning_rate,
        scale=learning_rate_scale(world_size, config.lr_scale_rule) if scaled else 1.0,
        warmup_updates=schedules.lr_warmup_updates if scaled else 0,
        end_fraction=config.learning_rate_end / config.learning_rate if decaying else 1.0,
        decay_updates=schedules.lr_decay_updates if decaying else 0,
        follows_world=scaled)


def unscaled_schedules_warning(config: TrainConfig, world_size: int) -> Optional[str]:
    """The start-up warning for DQN under --rank_scaling=batch at N > 1 fixed ranks without
    --scale_schedules_by_workers, whose schedules counted in updates then span N times the env steps; None
    otherwise. Legitimate, but the worst rule the scaling study measured (docs/scaling.md)."""
    if (not learns_from_replay(config) or config.rank_scaling != "batch" or world_size == 1 or config.elastic
            or scales_schedules(config)):
        return None
    return (f"--rank_scaling=batch with {world_size} ranks makes {world_size} times fewer updates per env step, so "
            "--target_update_period and the step-size warm-up and decay (counted in updates) span "
            f"{world_size} times the env steps they span at one rank; --scale_schedules_by_workers keeps them on "
            "one rank's clock")


# The rank count through which the default rule under --rank_scaling=batch (the step size times N, the schedules
# on one rank's env-step clock) kept one rank's env steps to a score within 1.25x on every task measured with real
# ranks (results/scaling/README.md).
LINEAR_RULE_MEASURED_RANKS = 16
# What 32 real ranks of the default rule needed against one rank with the same envs, by task (results/scaling/).
MEASURED_AT_32_RANKS = {
    "CartPole-v1": "CartPole needed 1.32x and 1 of 5 seeds did not solve within 150k env steps, while with longer "
                   "n-step returns (--n_step=5 for the preset's 3) every seed solved at 1.16x",
    "MinAtar/Breakout-v0": "MinAtar Breakout needed 1.05x (3 seeds)",
}


def rank_count_caution(config: TrainConfig, world_size: int) -> Optional[str]:
    """The start-up log's warning for a DQN job of the default rule with more ranks than it was measured to
    hold sample efficiency at; None otherwise (another rule, or as many ranks as were measured). It gives the
    32-rank figure of the task being trained where there is one, else those of the tasks measured."""
    default_rule = scales_lr(config) and config.lr_scale_rule == "linear" and scales_schedules(config)
    if not default_rule or world_size <= LINEAR_RULE_MEASURED_RANKS:
        return None
    if config.env_id in MEASURED_AT_32_RANKS:
        at_32 = f"at 32 ranks on this task {MEASURED_AT_32_RANKS[config.env_id]}"
    else:
        at_32 = (f"32 ranks were not measured on {config.env_id}; on the tasks that were, "
                 + "; ".join(MEASURED_AT_32_RANKS.values()))
    return (f"--rank_scaling=batch with {world_size} ranks multiplies the step size by {world_size}: the rule kept "
            f"one rank's env steps to a score (within 1.25x) through {LINEAR_RULE_MEASURED_RANKS} ranks on the tasks "
            f"measured; {at_32} (docs/scaling.md). Expect more env steps to a score than one rank needs"
            + (f", and consider a longer --n_step than {config.n_step}" if learns_from_replay(config) else ""))


def counts_are_per_rank(config: TrainConfig) -> bool:
    """Whether --num_envs, --replay_capacity and --learning_starts count per rank: with --counts_per_rank, and
    under --elastic (a world that changes size cannot re-split running ranks' envs and memories)."""
    return config.counts_per_rank or config.elastic


def rank_share(config: TrainConfig, world_size: int):
    """(envs, replay capacity) of one rank of `world_size`. --num_envs and --replay_capacity count over the
    job, like --total_env_steps, and are split evenly over the ranks, so that a preset runs the same envs and
    memory at any N: N times as many envs would change the algorithm (each env's episodes would span N times
    as many updates; docs/scaling.md). With --counts_per_rank (or --elastic) each rank has its own."""
    if not learns_from_replay(config):
        return _settings(config).rank_envs(config, world_size), 0
    envs = rank_envs(config, world_size)
    if counts_are_per_rank(config):
        return envs, config.replay_capacity
    capacity = config.replay_capacity // world_size
    starts = rank_learning_starts(config, world_size)
    if capacity < starts:
        raise ConfigError(f"--replay_capacity={config.replay_capacity}: split over {world_size} ranks, each rank's "
                          f"{capacity:,} transitions cannot hold the {starts:,} it needs before learning starts "
                          f"(--learning_starts={config.learning_starts} over the job, and at least a whole "
                          f"--batch_size={config.batch_size} on each rank under --rank_scaling=batch)")
    return envs, capacity


def rank_envs(config: TrainConfig, world_size: int) -> int:
    """One rank's envs: its share of the job's --num_envs, which must split evenly (its own with
    --counts_per_rank or --elastic)."""
    if counts_are_per_rank(config):
        return config.num_envs
    if config.num_envs % world_size:
        raise ConfigError(f"--num_envs={config.num_envs} (the job's envs) must split evenly over the {world_size} "
                          "ranks (or add --counts_per_rank for that many envs on each rank)")
    return config.num_envs // world_size


def rank_learning_starts(config: TrainConfig, world_size: int) -> int:
    """Transitions each rank's memory holds before it updates. --learning_starts counts over the job (the ranks
    fill alike), so each rank waits for its share, rounded up; under --rank_scaling=batch a rank draws whole
    batches from its own memory, so it also waits for one --batch_size. With --counts_per_rank (or --elastic)
    --learning_starts is each rank's own."""
    if counts_are_per_rank(config):
        return config.learning_starts
    share = -(-config.learning_starts // world_size)
    return max(share, config.batch_size) if config.rank_scaling == "batch" else share


def env_steps_before_first_update(config: TrainConfig, world_size: int) -> int:
    """The job's env steps before its first update at `world_size` ranks: every rank holds its --learning_starts
    transitions (all ranks filling alike), or with --agent=pqn every rank's first rollout is full."""
    if not learns_from_replay(config):
        return _settings(config).env_steps_before_first_update(config, world_size)
    return rank_learning_starts(config, world_size) * world_size


def check_world(config: TrainConfig, world_size: int) -> None:
    """Raises ConfigError if the job's envs, replay memory or (under --rank_scaling=updates) batch do not split
    over `world_size` ranks; for the trainer and for the commands that start runs at several sizes."""
    rank_share(config, world_size)
    if not learns_from_replay(config):
        _settings(config).check_world(config, world_size)
    elif config.rank_scaling == "updates" and config.batch_size % world_size:
        raise ConfigError(f"--rank_scaling=updates: --batch_size={config.batch_size} (the global batch) must "
                          f"split evenly over the {world_size} ranks")


def problem_with_runs(config: TrainConfig, world_sizes, sizes_flag: str, job_num_envs: Optional[int],
                      other_flags) -> Optional[str]:
    """For the commands that start runs of `config` at each of `world_sizes` (named by `sizes_flag`, e.g.
    "--workers=1,2"): the first reason they cannot, or None."""
    problem = job_num_envs is not None and job_num_envs_problem(config, job_num_envs, world_sizes, other_flags)
    if problem:
        return problem
    for size in world_sizes:
        try:
            check_world(config, size)
        except ConfigError as error:
            return f"{sizes_flag}: {error}"
    return None


def job_num_envs_problem(config: TrainConfig, job_num_envs: int, world_sizes, other_flags) -> Optional[str]:
    """Why the measuring commands' --job_num_envs (the envs of every run's job, at each of `world_sizes`) cannot
    be used with these runs' `config` and `other_flags`, or None. Only --counts_per_rank needs it: otherwise
    --num_envs counts over the job already."""
    if not config.counts_per_rank:
        return (f"--job_num_envs={job_num_envs}: only with --counts_per_rank (whose --num_envs counts per rank); "
                f"without it --num_envs={config.num_envs} is the job's envs already")
    if any(flag.startswith("--num_envs") for flag in other_flags):
        return f"--job_num_envs={job_num_envs} sets each run's --num_envs; leave --num_envs out of the flags after --"
    if job_num_envs <= 0 or any(job_num_envs % size for size in world_sizes):
        return (f"--job_num_envs={job_num_envs}: must be a positive multiple of every worker count "
                f"({', '.join(map(str, world_sizes))}), so each worker steps as many envs")
    return None


@dataclasses.dataclass(frozen=True)
class RankShape:
    """What one of N ranks does per update: the terms of the cost model's formula (hvd_dqn/plan/cost_formula.py)."""
    workers: int
    num_envs: int  # e: this rank's envs
    batch_size: int  # b: this rank's minibatch
    env_steps_per_update: float  # F_r: this rank's env steps per update


class ShapeError(ValueError):
    """A job's envs or batch that do not split evenly over its ranks."""


def rank_shape(rank_scaling: str, job_num_envs: int, batch_size: int, train_frequency: int,
               workers: int) -> RankShape:
    """The per-rank shape of a job of `workers` ranks; job_num_envs: E, the envs of the whole job."""
    if job_num_envs % workers:
        raise ShapeError(f"the job's {job_num_envs} envs do not split evenly over {workers} workers")
    if rank_scaling == "updates":
        if batch_size % workers:
            raise ShapeError(f"--batch_size={batch_size} does not split evenly over {workers} workers")
        return RankShape(workers, job_num_envs // workers, batch_size // workers, train_frequency / workers)
    return RankShape(workers, job_num_envs // workers, batch_size, float(train_frequency))
