"""DQN as one rank runs it: its replay memory, its learner (online and target networks) and its schedule.

`store(experience)` adds one step of the rank's envs to the memory; `learn(env_steps)` makes the updates now due:
one per --train_frequency env steps (the replay ratio), the same count on every rank (all ranks step the same
number of envs and their memories fill alike), each a collective gradient step; the target network is copied
every --target_update_period updates.

Minibatches are drawn on a thread of their own while the update before them runs (`hvd_dqn.memories.prefetch`);
with --draw_ahead, where every env step makes an update due, the next step's first one is drawn during this
step's last update too, before the next step is stored, so on a GPU the host's gather overlaps every update and
its allreduce.
"""
from __future__ import annotations

import concurrent.futures
import copy
import functools
from typing import Dict, Optional

import numpy as np

from hvd_dqn import collectives
from hvd_dqn.agent.base import AgentBase
from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.dqn.settings import noisy_nets
from hvd_dqn.agent.interface import MemorySetting
from hvd_dqn.agent.networks import is_image_observation, q_network_for
from hvd_dqn.agent.noisy import is_noisy, without_noise
from hvd_dqn.agent.optimizers import rescale_learning_rate
from hvd_dqn.agent.policy import EpsilonGreedyActor, NoisyNetworkActor
from hvd_dqn.agent.schedules import LinearSchedule
from hvd_dqn.config import TrainConfig
from hvd_dqn.rank_split import rank_learning_starts, update_counted_schedules
from hvd_dqn.memories.frames import FrameReplayMemory
from hvd_dqn.memories.replay import PrioritySettings, ReplayMemory
from hvd_dqn.memories.prefetch import minibatches


def draws_ahead(config: TrainConfig, update_on_gpu: bool) -> bool:
    """Whether DQN draws each next minibatch on a thread of its own while the update before it runs, across env
    steps too (--draw_ahead; on with "auto" where the update runs on a GPU and the draw on the host's cores).
    Never with prioritised replay, whose draws need the priorities the update before them sets."""
    if config.prioritized_replay:
        return False
    return config.draw_ahead == "on" or (config.draw_ahead == "auto" and update_on_gpu)


def noise_off(network):
    """`network` as a model of the observations alone: a noisy network with its noise off (its layers' means),
    any other as it is. What greedy acting outside training (evaluation, export) reads."""
    return without_noise(network) if is_noisy(network) else network


class DQNAgent(AgentBase):
    """A rank's DQN: the replay memory, the learner, the minibatch stream (its own RNG, so acting's draws never
    move it) and the env steps stored since the last update (fewer than one update's worth; checkpointed).

    `rank_metrics` records each update's loss and Q values (`hvd_dqn.run.metrics.RankMetrics`)."""

    memory_name = "replay memory"
    iterations_per_cycle = 1
    learner_class = DQNLearner  # the update; an agent of the DQN family changes its targets and loss there

    def __init__(self, config: TrainConfig, learner: DQNLearner, memory, spec, num_envs: int, world_size: int,
                 sample_rng: np.random.Generator, rank_metrics):
        super().__init__(config, learner, memory, spec, sample_rng, rank_metrics)
        self.num_envs = num_envs
        # Updates between target copies (divided by the ranks with --scale_schedules_by_workers).
        self.target_update_period = update_counted_schedules(config, world_size).target_update_period
        self.ranks_sharing_an_update = 1  # set for its world by `join_world`
        # Env steps stored and not yet learned from: the remainder below one update's --train_frequency.
        self.env_steps_since_update = 0
        self.learning_starts = config.learning_starts  # this rank's share (`join_world`)
        self.world_size = 1  # set by `join_world`
        self.memory_ready = False  # whether every rank's memory holds its share of --learning_starts
        # Prioritised replay's importance-sampling exponent, annealed to 1 by the end (Schaul et al. 2016).
        self.priority_beta = LinearSchedule(config.priority_beta_start, config.priority_beta_end, config.total_env_steps)
        self.sampler = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="minibatches")
        # --draw_ahead: the next minibatch, being drawn on the sampler thread; the sampling stream's state before
        # that draw, which a checkpoint keeps so that a resumed run draws the same minibatch again.
        self.draws_ahead = False  # set by `build` from --draw_ahead and the device
        self._drawn_ahead: Optional[concurrent.futures.Future] = None
        self._sample_rng_before_draw = None
        self._draw_again = False  # after a restore: draw the saved minibatch again before the next store

    @classmethod
    def build(cls, config: TrainConfig, spec, num_envs: int, replay_capacity: int, world_size: int,
              sample_rng: np.random.Generator, rank_metrics) -> "DQNAgent":
        """A rank's DQN for envs of `spec`: `num_envs` and `replay_capacity` are the rank's share."""
        # Built in this order (online, target, optimizer, memory) so that a seed gives the same initial weights.
        online = cls.network(config, spec, "online")
        learner = cls.learner_class.from_config(config, online, cls.network(config, spec, "target"), world_size)
        memory = make_replay_memory(config, spec, num_envs, replay_capacity)
        agent = cls(config, learner, memory, spec, num_envs, world_size, sample_rng, rank_metrics)
        # The learner's own random draws (noisy nets' noise, IQN's levels) take their seed from this rank's stream's
        # seed (the run's seed + the rank) without drawing from it: ranks draw apart, and a resume the same.
        learner.seed = int(sample_rng.bit_generator.seed_seq.generate_state(1)[0])
        import tensorflow as tf

        agent.draws_ahead = draws_ahead(config, bool(tf.config.list_logical_devices("GPU")))
        return agent

    # --- what the class answers (hvd_dqn.agent.interface.AgentClass) ---------------------------------------------
    @staticmethod
    def network(config: TrainConfig, spec, name: str):
        return q_network_for(config, spec, name)

    @classmethod
    def q_values(cls, network):
        """Q(s, a) as a model of the observations alone, sharing `network`'s weights; a noisy network's with its
        noise off (the greedy policy of evaluation and export)."""
        return cls.q_values_of(noise_off(network), network)

    @staticmethod
    def q_values_of(model, network):
        """Q(s, a) (B, actions) as a model of `model`'s inputs, from its outputs: those of `network` (which `model`
        is, or calls with its noise set). DQN's outputs are Q-values already."""
        return model

    @staticmethod
    def memory_bytes(config: TrainConfig, spec, num_envs: int, capacity: int) -> int:
        return replay_memory_bytes(config, spec, num_envs, capacity)

    @staticmethod
    def replay_memory(config: TrainConfig, spec, num_envs: int, capacity: int):
        """A replay memory as this agent's rank keeps it (the measuring commands time its stores and draws)."""
        return make_replay_memory(config, spec, num_envs, capacity)

    @staticmethod
    def draws_ahead_with(config: TrainConfig, update_on_gpu: bool) -> bool:
        """Whether a rank of `config` draws minibatches ahead (the instance's `draws_ahead`, before one is built)."""
        return draws_ahead(config, update_on_gpu)

    @staticmethod
    def memory_setting(config: TrainConfig, ranks_on_host: int) -> MemorySetting:
        remedies = ["fewer ranks per host"] if ranks_on_host > 1 else []
        if config.counts_per_rank and ranks_on_host > 1:
            remedies.append("--nocounts_per_rank (which splits --replay_capacity over the ranks)")
        remedies.append("a smaller --replay_capacity")
        return MemorySetting(f"--replay_capacity={config.replay_capacity}", "replay", "the replay memories", remedies)

    # --- acting -----------------------------------------------------------------------------------------------
    def make_actor(self, rng: np.random.Generator, own_network: bool) -> EpsilonGreedyActor:
        """Acting in order reads the online network itself; acting ahead (the pipeline) gets a copy of its own."""
        network = self.network(self.config, self.spec, "acting") if own_network else self.online
        if is_noisy(network):  # fresh noise at every step explores
            return NoisyNetworkActor(self.q_values_of(network, network), self.spec.num_actions, rng)
        return EpsilonGreedyActor(self.q_values(network), self.spec.num_actions, rng)

    def epsilon_schedule(self) -> LinearSchedule:
        """The config's epsilon schedule; 0 throughout with --noisy_nets, whose noise explores instead (as
        Dopamine's full Rainbow, whose epsilon_fn is zero_epsilon when noisy)."""
        if noisy_nets(self.config):
            return LinearSchedule(0.0, 0.0, 0)
        return super().epsilon_schedule()

    def iterations_per_update(self, num_envs: int) -> float:
        return self.config.train_frequency / (num_envs * self.ranks_sharing_an_update)

    # --- the world ---------------------------------------------------------------------------------------------
    def join_world(self, world_size: int) -> None:
        """--rank_scaling=updates: all N ranks' env steps count towards each update and each rank draws 1/N of
        the batch; "batch": a rank's own env steps count towards its updates, with whole batches. Under --elastic
        a new world also means waiting until every rank (a newcomer's memory is empty) is ready again."""
        self.ranks_sharing_an_update = world_size if self.config.rank_scaling == "updates" else 1
        self.world_size = world_size
        self._forget_drawn_ahead()  # drawn for the old world's batch size
        self.learning_starts = rank_learning_starts(self.config, world_size)
        self.memory_ready = False

    def on_world_change(self, world_size: int) -> bool:
        return rescale_learning_rate(self.learner.optimizer, self.config, world_size)

    def rank_state(self) -> Dict[str, object]:
        state = {"env_steps_since_update": self.env_steps_since_update}
        if self._drawn_ahead is not None:
            self._drawn_ahead.result()  # the stream is at rest once the draw is done
            state["sample_rng_before_draw"] = self._sample_rng_before_draw
        return state

    def load_rank_state(self, state: Optional[Dict[str, object]]) -> None:
        """With an empty memory (state None) updates restart from nothing owed once it is refilled, as in a
        fresh run. A minibatch drawn ahead when the state was saved is drawn again, from the same stream state
        and the same memory, before the next step is stored."""
        self._forget_drawn_ahead()
        # Checkpoints before version 0.3 named the count "update_credit".
        owed = None if state is None else state.get("env_steps_since_update", state.get("update_credit"))
        self.env_steps_since_update = int(owed) if owed is not None else 0
        if state is not None and state.get("sample_rng_before_draw") is not None:
            self.sample_rng.bit_generator.state = state["sample_rng_before_draw"]
            self._draw_again = self.draws_ahead

    # --- storing -----------------------------------------------------------------------------------------------
    def store(self, experience):
        if self._draw_again:  # after a restore, before the memory changes
            self._draw_ahead()
            self._draw_again = False
        if self._drawn_ahead is not None:
            self._drawn_ahead.result()  # the draw reads the memory this step writes to
        return super().store(experience)

    # --- learning --------------------------------------------------------------------------------------
    def learn(self, env_steps: int, counters) -> None:
        """Collective: the updates one stored step of this rank made due. `env_steps`: the job's env steps
        when that step was stored (prioritised replay's beta follows them); `counters.updates` counts them."""
        config = self.config
        if not self.memory_ready:
            self.memory_ready = self._every_memory_ready()
            if not self.memory_ready:
                return
        self.env_steps_since_update += self.num_envs * self.ranks_sharing_an_update
        due, self.env_steps_since_update = divmod(self.env_steps_since_update, config.train_frequency)
        if self.draws_ahead:
            batches = self._batches_drawn_ahead(due)
        else:
            batch_size = config.batch_size // self.ranks_sharing_an_update
            draw = functools.partial(self.memory.sample, batch_size, self.sample_rng, self.priority_beta(env_steps))
            batches = minibatches(draw, due, None if self.memory.priority else self.sampler)
        for batch in batches:
            metrics = self.learner.update(batch)
            if batch.indices is not None:  # prioritised: this rank's new priorities from its TD errors
                self.memory.update_priorities(batch.indices, metrics["td_errors"])
            self.rank_metrics.record_update(metrics)
            counters.updates += 1
            if counters.updates % self.target_update_period == 0:
                self.learner.sync_target(config.target_update_tau)

    def _batches_drawn_ahead(self, count: int):
        """`count` minibatches, each drawn while the update before it ran; the first was drawn during the last
        update of the env step before (or is drawn now, in line). Each one taken, the next is started: for this
        step's next update, or for the next step's first when that step will make one due. Never further ahead,
        so a minibatch drawn ahead misses one env step at most, and a checkpoint (taken between steps) holds the
        very memory it was drawn from."""
        next_step_updates = self.env_steps_since_update + self.num_envs * self.ranks_sharing_an_update >= \
            self.config.train_frequency
        for index in range(count):
            batch = self._drawn_ahead.result() if self._drawn_ahead is not None else self._draw()
            self._drawn_ahead = None
            if index + 1 < count or next_step_updates:
                self._draw_ahead()
            yield batch

    def _draw(self):
        # Uniform replay only (prioritised replay never draws ahead), so the importance exponent plays no part.
        return self.memory.sample(self.config.batch_size // self.ranks_sharing_an_update, self.sample_rng)

    def _draw_ahead(self) -> None:
        self._sample_rng_before_draw = copy.deepcopy(self.sample_rng.bit_generator.state)
        self._drawn_ahead = self.sampler.submit(self._draw)

    def _forget_drawn_ahead(self) -> None:
        if self._drawn_ahead is not None:
            self._drawn_ahead.result()
        self._drawn_ahead, self._sample_rng_before_draw, self._draw_again = None, None, False

    def _every_memory_ready(self) -> bool:
        """Whether every rank's memory holds its --learning_starts entries (memories never shrink).

        The ranks vote (one tiny allreduce per iteration, only until all are ready): the first update is a
        collective, so all must start it at the same iteration, and no rank can tell alone. A frame memory
        also holds one final-observation entry per ended episode, so ranks whose episodes end at different
        times fill at different rates (alone, one rank would wait in its first update while another waits in
        the next collective, for ever); and under --elastic a rank that joined starts empty."""
        ready = len(self.memory) >= self.learning_starts  # this rank's share of --learning_starts
        if self.world_size == 1:
            return ready
        not_ready = collectives.sum_over_ranks(np.array([0.0 if ready else 1.0]), "replay_not_ready")[0]
        return not_ready == 0

    def close(self) -> None:
        self._forget_drawn_ahead()
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


def replay_memory_bytes(config: TrainConfig, spec, num_envs: int, capacity: int) -> int:
    """Bytes the replay memory of `capacity` transitions over `num_envs` envs will hold once allocated."""
    from hvd_dqn.memories.sum_tree import SumTree

    # A small memory of the same kind gives the bytes per entry; the arrays grow linearly with the capacity.
    probe_capacity = num_envs * max(64, config.n_step + 8)
    probe = make_replay_memory(config.replace(prioritized_replay=False), spec, num_envs, probe_capacity)
    segment = capacity // num_envs
    total = probe.bytes_per_transition * segment * num_envs
    if config.prioritized_replay:
        total += SumTree.bytes_for(segment * num_envs)
    return int(total)
