"""The learning side of a rank: its replay memory and the updates that env steps pay for.

`store(experience)` adds one step of the rank's envs to the memory; `learn(env_steps)` makes the updates
that the stored env steps bought: one per --train_frequency env steps, the same count on every rank (all
ranks step the same number of envs and their memories fill alike), each a collective gradient step.
"""
from __future__ import annotations

import concurrent.futures
import functools

import numpy as np

from hvd_dqn.agent.learner import ALLREDUCE_GROUPS, DQNLearner
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.networks import is_image_observation
from hvd_dqn.agent.policy import store_step
from hvd_dqn.agent.pqn import PQNLearner
from hvd_dqn.agent.schedules import LinearSchedule, update_counted_schedules
from hvd_dqn.config import TrainConfig
from hvd_dqn.rank_split import rank_learning_starts, scales_lr
from hvd_dqn.replay.frames import FrameReplayMemory
from hvd_dqn.replay.memory import PrioritySettings, ReplayMemory
from hvd_dqn.replay.prefetch import minibatches
from hvd_dqn.run import distributed
from hvd_dqn.run.acting_side import Experience
from hvd_dqn.run.metrics import RankMetrics


class LearningSide:
    """Owns the replay memory, the minibatch stream (its own RNG, so acting's draws never move it) and the
    update credit: this rank's env steps not yet paid for with updates (checkpointed)."""

    def __init__(self, config: TrainConfig, learner: DQNLearner, replay, sample_rng: np.random.Generator,
                 num_envs: int, rank_metrics: RankMetrics, target_update_period: int):
        self.config = config
        self.learner = learner
        self.replay = replay
        self.sample_rng = sample_rng
        self.num_envs = num_envs
        self.rank_metrics = rank_metrics
        # Updates between target copies (the trainer's, divided by the ranks with --scale_schedules_by_workers).
        self.target_update_period = target_update_period
        self.ranks_sharing_an_update = 1  # set by the trainer for its world (`share_updates_over`)
        self.update_credit = 0
        self.learning_starts = config.learning_starts  # this rank's share (`share_updates_over`)
        self.world_size = 1  # set by `share_updates_over`
        self.replay_ready = False  # whether every rank's memory holds its share of --learning_starts
        # Prioritised replay's importance-sampling exponent, annealed to 1 by the end (Schaul et al. 2016).
        self.priority_beta = LinearSchedule(config.priority_beta_start, 1.0, config.total_env_steps)
        self.sampler = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="minibatches")

    def share_updates_over(self, world_size: int) -> None:
        """--rank_scaling=updates: all N ranks' env steps pay for each update and each rank draws 1/N of the
        batch; "batch": a rank pays for its updates alone, with whole batches. Under --elastic a new world
        also means waiting until every rank (a newcomer's memory is empty) is ready again."""
        self.ranks_sharing_an_update = world_size if self.config.rank_scaling == "updates" else 1
        self.world_size = world_size
        self.learning_starts = rank_learning_starts(self.config, world_size)
        self.replay_ready = False

    def store(self, experience: Experience):
        """Stores one step of every env (rewards clipped for learning if asked; the true last observation
        where an episode ended; discount 0 at learning terminals); returns (raw rewards, done)."""
        _, reward, done = store_step(self.replay, experience.observation, experience.action, experience.step_result,
                                     self.config.clip_rewards, self.config.terminal_on_life_loss)
        return reward, done

    def learn(self, env_steps: int, counters) -> None:
        """Collective: the updates one stored step of this rank paid for. `env_steps`: the job's env steps
        when that step was stored (prioritised replay's beta follows them); `counters.updates` counts them."""
        config = self.config
        if not self.replay_ready:
            self.replay_ready = self._every_replay_memory_ready()
            if not self.replay_ready:
                return
        self.update_credit += self.num_envs * self.ranks_sharing_an_update
        count, self.update_credit = divmod(self.update_credit, config.train_frequency)
        batch_size = config.batch_size // self.ranks_sharing_an_update
        draw = functools.partial(self.replay.sample, batch_size, self.sample_rng, self.priority_beta(env_steps))
        for batch in minibatches(draw, count, None if self.replay.priority else self.sampler):
            metrics = self.learner.update(batch)
            if batch.indices is not None:  # prioritised: this rank's new priorities from its TD errors
                self.replay.update_priorities(batch.indices, metrics["td_errors"])
            self.rank_metrics.record_update(metrics)
            counters.updates += 1
            if counters.updates % self.target_update_period == 0:
                self.learner.sync_target(config.target_update_tau)

    def _every_replay_memory_ready(self) -> bool:
        """Whether every rank's memory holds its --learning_starts entries (memories never shrink).

        The ranks vote (one tiny allreduce per iteration, only until all are ready): the first update is a
        collective, so all must start it at the same iteration, and no rank can tell alone. A frame memory
        also holds one final-observation entry per ended episode, so ranks whose episodes end at different
        times fill at different rates (alone, one rank would wait in its first update while another waits in
        the next collective, for ever); and under --elastic a rank that joined starts empty."""
        ready = len(self.replay) >= self.learning_starts  # this rank's share of --learning_starts
        if self.world_size == 1:
            return ready
        not_ready = distributed.sum_over_ranks(np.array([0.0 if ready else 1.0]), "replay_not_ready")[0]
        return not_ready == 0

    def close(self) -> None:
        self.sampler.shutdown()


def make_replay_memory(config: TrainConfig, spec, num_envs: int = None, capacity: int = None):
    """Frame-deduplicated memory for stacked frames, whole observations for vector ones; uniform or
    prioritised, one-step or n-step, as the config says; `num_envs` and `capacity` (default: the config's)
    are this rank's."""
    num_envs = num_envs or config.num_envs
    capacity = capacity or config.replay_capacity
    priority = PrioritySettings(config.priority_alpha, config.priority_epsilon) if config.prioritized_replay else None
    if is_image_observation(spec.observation_shape, spec.observation_dtype):
        stack, *frame_shape = spec.observation_shape
        return FrameReplayMemory(capacity, num_envs, tuple(frame_shape), stack,
                                 config.gamma, config.n_step, priority)
    # MinAtar's bool grids are stored as bools (bit-packed); every other vector observation as float32.
    dtype = np.bool_ if spec.observation_dtype == np.bool_ else np.float32
    return ReplayMemory(capacity, num_envs, spec.observation_shape, dtype,
                        config.gamma, config.n_step, priority)


def make_learner(config: TrainConfig, online, target, world_size: int, distributed: bool = True) -> DQNLearner:
    """The learner a rank of a job of `world_size` ranks trains with: the config's optimizer and step size (scaled
    to the ranks where the config says so), its loss and targets, and Horovod's DistributedOptimizer around the
    optimizer (unless distributed=False: the same update without the allreduce, which the measuring commands
    compare with it)."""
    return DQNLearner(online, target, config_optimizer(config, world_size, distributed), config.double_dqn,
                      config.huber_delta, xla=config.xla, fp16_allreduce=config.fp16_allreduce, loss=config.loss,
                      grouped_allreduce=not config.elastic)


def make_pqn_learner(config: TrainConfig, online, world_size: int, distributed: bool = True) -> PQNLearner:
    """The learner of a PQN rank (--agent=pqn): the online network and the config's optimizer, no target."""
    return PQNLearner(online, config_optimizer(config, world_size, distributed), config.loss, config.huber_delta,
                      xla=config.xla, fp16_allreduce=config.fp16_allreduce, allreduce_groups=ALLREDUCE_GROUPS)


def config_optimizer(config: TrainConfig, world_size: int, distributed: bool = True):
    """The config's optimizer and step size for a rank of `world_size` (scaled to the ranks where the config
    says so), in Horovod's DistributedOptimizer unless distributed=False."""
    schedules = update_counted_schedules(config, world_size)
    return make_optimizer(config.learning_rate, config.adam_epsilon, config.max_grad_norm, world_size,
                          scales_lr(config), schedules.lr_warmup_updates, distributed=distributed,
                          elastic=config.elastic, fp16_allreduce=config.fp16_allreduce,
                          mixed_precision=config.mixed_precision, optimizer=config.optimizer,
                          rmsprop_rho=config.rmsprop_rho, rmsprop_epsilon=config.rmsprop_epsilon,
                          rmsprop_centered=config.rmsprop_centered, lr_scale_rule=config.lr_scale_rule,
                          learning_rate_end=config.learning_rate_end, lr_decay_updates=schedules.lr_decay_updates,
                          layer_adaptation=config.layer_adaptation)
