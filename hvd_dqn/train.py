"""Data-parallel DQN training: `horovodrun -np N python -m hvd_dqn.train --flagfile=configs/cartpole.flags`.

Every rank owns a vectorised environment, a replay memory and a replica of the Q-network. Each iteration
a rank steps its envs once, stores the transitions, and takes its share of synchronous updates, in which
Horovod averages the gradients of all ranks' minibatches. Rank 0 broadcasts the initial state, and alone
writes checkpoints, metrics and TensorBoard events.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import fcntl
import functools
import os
import shutil
import signal
import sys
import time
from typing import List, Optional

# TensorFlow 2.15 prints C++ start-up chatter, and harmless "Unable to register cuDNN factory" errors,
# once per rank; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
from absl import app, flags, logging

from hvd_dqn import checkpoint, distributed, storage
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.flags import config_from_flags, define_flags
from hvd_dqn.prefetch import minibatches

define_flags()
PROGRAM = "hvd_dqn.train"


@dataclasses.dataclass
class Counters:
    """Progress of the whole job; identical on every rank."""

    env_steps: int = 0  # summed over ranks
    episodes: int = 0  # summed over ranks
    updates: int = 0
    evaluations_at_target: int = 0  # the latest evaluations in a row that reached --stop_at_eval_return
    # With --stop_at_train_return: the returns of the job's latest --stop_train_episodes training episodes,
    # oldest first, so that a resumed or elastic run keeps counting the same window.
    recent_returns: List[float] = dataclasses.field(default_factory=list)


class StopSignals:
    """SIGTERM (pre-emption: Slurm, Kubernetes, horovodrun passing on its own signal) and SIGINT (Ctrl-C)
    only set a flag here; the loop polls it collectively (`Trainer._stop_requested`), so every rank stops
    after the same iteration, writes the final checkpoint together and exits cleanly. A second signal of
    the same kind gets the default behaviour (an immediate stop)."""

    def __init__(self):
        self.received: Optional[str] = None

    def install(self) -> None:
        if self.received:  # entered again (elastic): a signal already received keeps its effect
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        signal.signal(signum, signal.SIG_DFL)


# The ranks agree on stopping every this many env steps per rank (one tiny allreduce): short enough to stop
# within horovodrun's 5-second grace period on Atari, rare enough to cost nothing on CartPole.
STOP_POLL_ENV_STEPS_PER_RANK = 32


class Trainer:
    """One rank's part of a training run. `run()` is the loop; the other methods are its phases."""

    def __init__(self, config: TrainConfig):
        import tensorflow as tf

        from hvd_dqn.actor import EpsilonGreedyActor
        from hvd_dqn.envs import make_env_for, spec_of, steps_in_background
        from hvd_dqn.learner import DQNLearner, make_optimizer
        from hvd_dqn.metrics import EpisodeTracker, RankMetrics
        from hvd_dqn.networks import q_network_for
        from hvd_dqn.schedules import LinearSchedule

        self.config = config
        self.world = distributed.init_horovod(config.intra_op_threads, config.inter_op_threads,
                                              config.deterministic_ops)
        # An object-store --logdir (s3://, gs://): every rank writes into a local mirror, which uploads.
        self.store = storage.LogdirMirror(config.logdir, self.world.rank) if storage.is_remote(config.logdir) \
            else None
        self.logdir = self.store.local if self.store else config.logdir  # where files are written first
        self._logdir_lock = None  # rank 0's lock on a local logdir (_lock_logdir)
        rank_seed = config.seed + self.world.rank
        # Seeds Python, NumPy and TensorFlow: Keras 2.15 draws unseeded initializers from Python's `random`.
        tf.keras.utils.set_random_seed(rank_seed)  # only rank 0's initial weights survive the broadcast
        # Two streams: acting (epsilon-greedy draws) and minibatch sampling. With one, overlapping acting
        # and learning would interleave their draws in another order and change every minibatch.
        self.rng = np.random.default_rng(rank_seed)
        self.sample_rng = np.random.default_rng(np.random.SeedSequence([rank_seed, 1]))

        if config.mixed_precision:  # before the networks are built: their layers take the policy then
            tf.keras.mixed_precision.set_global_policy("mixed_float16")
        # This rank's envs and replay capacity: the job's, split evenly, under --rank_scaling=updates (the job
        # runs one rank's algorithm); each rank's own otherwise.
        self.num_envs, self.replay_capacity = rank_share(config, self.world.size)
        self.env = make_env_for(config, self.num_envs, self.world.local_size)
        # Acting overlapped with learning (see `_act_overlapped`), where the env can step in the background.
        self.overlap = config.overlap_acting and steps_in_background(self.env)
        self.unpaid_env_steps = None  # overlap: the job's env steps at a stored step whose updates are unmade
        self.action_in_flight = None  # overlap: the actions of a step sent to the env and not yet received
        spec = spec_of(self.env)
        online, target = (q_network_for(config, spec, name) for name in ("online", "target"))
        optimizer = make_optimizer(config.learning_rate, config.adam_epsilon, config.max_grad_norm,
                                   self.world.size, config.scale_lr_by_workers, config.lr_warmup_updates,
                                   elastic=config.elastic, fp16_allreduce=config.fp16_allreduce,
                                   mixed_precision=config.mixed_precision, optimizer=config.optimizer,
                                   rmsprop_rho=config.rmsprop_rho, rmsprop_epsilon=config.rmsprop_epsilon,
                                   rmsprop_centered=config.rmsprop_centered, lr_scale_rule=config.lr_scale_rule,
                                   learning_rate_end=config.learning_rate_end,
                                   lr_decay_updates=config.lr_decay_updates)
        self.learner = DQNLearner(online, target, optimizer, config.double_dqn, config.huber_delta, xla=config.xla,
                                  fp16_allreduce=config.fp16_allreduce, loss=config.loss)
        self.replay = make_replay_memory(config, spec, self.num_envs, self.replay_capacity)
        # Prioritised replay's importance-sampling exponent, annealed to 1 by the end (Schaul et al. 2016).
        self.priority_beta = LinearSchedule(config.priority_beta_start, 1.0, config.total_env_steps)
        self.actor = EpsilonGreedyActor(online, spec.num_actions, self.rng)
        self.epsilon = LinearSchedule(config.epsilon_start, config.epsilon_end, config.epsilon_decay_env_steps,
                                      config.epsilon_decay_start_env_steps)
        self.eval_env = None
        self._take_place_in_world()
        self.counters = Counters()
        self.unreported_episodes = 0  # episodes this rank finished since the counters were last summed
        self.last_checkpoint_env_steps = None
        self.update_credit = 0  # env steps of this rank not yet paid for with updates (checkpointed)
        self.replay_ready = False  # whether every rank's memory holds --learning_starts transitions
        self.stopped_by = None  # the signal that ended the run early
        # What the loop keeps across the re-entries of an elastic run (a rank's own, never rolled back).
        self.observation = None  # the envs' current observations; None until the first reset
        self.episodes = EpisodeTracker(self.num_envs)
        self.rank_metrics = RankMetrics()
        self.signals = StopSignals()
        self.writer = None  # rank 0's MetricsWriter
        self.settings_logged = False
        self.commit = None  # with --elastic: commits the training state (hvd_dqn.elastic)
        self.sampler = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="minibatches")

    # --- set-up ----------------------------------------------------------------------------------------
    def _take_place_in_world(self) -> None:
        """What depends on this rank's place in the world: Ape-X's per-env epsilons and the evaluation
        envs (both split over ranks). Done at start-up and, with --elastic, after every change of world."""
        from hvd_dqn.envs import make_env_for
        from hvd_dqn.schedules import apex_epsilons

        config, world = self.config, self.world
        if config.rank_scaling == "updates" and config.batch_size % world.size:
            raise ConfigError(f"--rank_scaling=updates: --batch_size={config.batch_size} (the global batch) must "
                              f"split evenly over the {world.size} ranks")
        self.env_epsilons = None  # with Ape-X exploration: this rank's share of the fixed per-env epsilons
        if config.apex_exploration:
            all_epsilons = apex_epsilons(self.num_envs * world.size, config.apex_epsilon_base, config.apex_alpha)
            self.env_epsilons = all_epsilons[world.rank * self.num_envs:][:self.num_envs]
            self.mean_env_epsilon = float(all_epsilons.mean())
        if self.eval_env is not None:
            self.eval_env.close()
        # Evaluation episodes are split over ranks; rank r plays its share in parallel envs.
        share = config.eval_episodes // world.size + int(world.rank < config.eval_episodes % world.size)
        self.eval_env = None
        if share and config.eval_interval_env_steps:
            self.eval_env = make_env_for(config, share, world.local_size)

    def on_world_change(self) -> None:
        """Horovod Elastic reset callback: a worker was lost or joined and Horovod was re-initialised.
        Ranks are renumbered, so this rank re-reads its place, re-splits what is split over ranks and
        rescales the learning rate; rank 0 (perhaps a new one) takes over the metrics files. Rolled-back
        counters and rank 0's weights arrive afterwards through the elastic state's sync."""
        from hvd_dqn.learner import rescale_learning_rate

        old_size = self.world.size
        self.world = distributed.current_world()
        self._take_place_in_world()
        # Only a --scale_lr_by_workers rate follows the world; a decay-only schedule keeps its scale of 1.
        rescaled = self.config.scale_lr_by_workers and rescale_learning_rate(
            self.learner.optimizer, self.world.size, self.config.lr_scale_rule)
        # A joining rank starts with an empty memory; no rank updates until all have --learning_starts.
        self.replay_ready = False
        # Only rank 0 reports progress (main() quiets the others); a rank promoted to rank 0 takes over.
        logging.set_verbosity(logging.INFO if self.world.is_chief else logging.WARNING)
        if self.world.is_chief:
            logging.warning("world changed from %d to %d ranks%s; going on from the last commit (%s env steps, "
                            "%s updates)", old_size, self.world.size, "; learning rate rescaled" if rescaled else "",
                            f"{self.counters.env_steps:,}", f"{self.counters.updates:,}")

    def check_shared_logdir(self) -> None:
        """Collective: with --checkpoint_replay every rank writes into --logdir, so all must see the same
        folder. Rank 0 leaves a file there; a rank that cannot see it (a host-local folder) is named."""
        if not self.config.checkpoint_replay or self.world.size == 1:
            return
        name = f".shared-probe-{os.getpid()}"
        probe = os.path.join(self.config.logdir, name)
        if self.world.is_chief:
            if self.store:
                self.store.leave_probe(name)
            else:
                with open(probe, "w") as handle:
                    handle.write("rank 0 was here")
        name, probe = distributed.broadcast_object((name, probe), "shared_probe")
        if self.store:
            seen = self.store.sees_and_writes(name, self.world.rank)
        else:
            seen = os.path.exists(probe) and os.access(self.config.logdir, os.W_OK)
        views = distributed.gather_objects((seen, os.environ.get("HOROVOD_HOSTNAME") or os.uname().nodename),
                                           "shared_probe_seen")
        if self.world.is_chief:
            self.store.remove(name) if self.store else os.remove(probe)
        blind = [f"rank {rank} on {host}" for rank, (seen, host) in enumerate(views) if not seen]
        if blind:
            where = ("one store every rank can read and write (check their credentials and endpoint)" if self.store
                     else "one shared, writable folder for every rank")
            raise ConfigError(f"--checkpoint_replay: --logdir={self.config.logdir} is not {where} "
                              f"({', '.join(blind)} cannot see rank 0's files); put it on "
                              "a shared file system or leave out --checkpoint_replay")

    def _lock_logdir(self):
        """Rank 0 holds an exclusive lock on a local logdir for the life of its process, so a second job
        started into the same folder (a resubmitted batch job, a study run twice) stops with one line instead
        of appending to this job's logs and pruning its checkpoints. The lock is the kernel's (flock on the
        folder itself, no file added) and goes with the process, so a killed job leaves nothing behind. Not
        under --elastic, where rank 0 may move to another process, nor for object stores, whose working
        copy is a folder of this process's own. Returns the problem, or None."""
        if self.store or self.config.elastic:
            return None
        descriptor = os.open(self.logdir, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return (f"--logdir={self.config.logdir}: another training job is writing there; wait for it to "
                    "finish, or choose another --logdir")
        except OSError:  # a file system without flock (some network mounts): train unguarded, as before
            os.close(descriptor)
            return None
        self._logdir_lock = descriptor  # held until the process exits
        return None

    def _choose_starting_point(self):
        """Rank 0: (checkpoint to resume or None, its counters, problem or None)."""
        existing = self._complete_checkpoints()
        if self.config.resume or (self.config.auto_resume and existing):
            resume_from, counters, problem = self._load_newest_readable_checkpoint()
            if problem:
                problem = f"{'--resume' if self.config.resume else '--auto_resume'}: {problem}"
            return resume_from, counters, problem
        if existing:
            # A fresh run would write its checkpoints among the earlier run's and prune them: refuse.
            return None, None, (f"--logdir={self.config.logdir} already holds checkpoints of a run (newest "
                                f"{os.path.basename(existing[-1])}); add --resume to continue it, or choose another "
                                "--logdir")
        return None, None, None

    def restore_or_broadcast(self) -> None:
        """With --resume (or --auto_resume and a checkpoint to resume), rank 0 loads the newest checkpoint
        that reads back whole (skipping, with a warning naming each, any that are corrupt); then everything
        it holds is broadcast. A fresh run into a logdir that holds checkpoints is refused."""
        resume_from, counters, problem = None, None, None
        if self.world.is_chief:
            problem = self._lock_logdir()
            if problem is None:
                resume_from, counters, problem = self._choose_starting_point()
        problem = distributed.broadcast_object(problem, "resume_problem")
        resume_from = distributed.broadcast_object(resume_from, "resume_path")
        if problem:
            raise ConfigError(problem)
        counters = distributed.broadcast_object(counters, "resume_counters")
        # Horovod: every rank starts from rank 0's weights, target weights and optimizer state.
        distributed.broadcast_from_chief(self.learner.synchronized_variables)
        if counters is not None:
            self.counters = Counters(**{field.name: [float(value) for value in counters.get(field.name, [])]
                                        if field.name == "recent_returns" else int(counters.get(field.name, 0))
                                        for field in dataclasses.fields(Counters)})
            self.last_checkpoint_env_steps = self.counters.env_steps
            self._restore_rank_state(resume_from, counters)

    def _complete_checkpoints(self) -> List[str]:
        """The run's complete checkpoints, oldest first: folders, or URLs in an object store."""
        return self.store.complete_checkpoints() if self.store else checkpoint.complete_checkpoints(self.config.logdir)

    def _load_newest_readable_checkpoint(self):
        """Rank 0: (path, counters, None) for the newest complete checkpoint that loads, or (None, None, why).
        A stored checkpoint's path is its URL; it is read from a local copy."""
        candidates = self._complete_checkpoints()[::-1]
        if not candidates:
            return None, None, f"no complete checkpoint under {checkpoint.checkpoint_root(self.config.logdir)}"
        for path in candidates:
            try:
                local = self.store.fetch_checkpoint(path) if self.store else path
                saved = TrainConfig.from_json(checkpoint.read_config_json(local))
            except (OSError, ValueError, TypeError, storage.StorageError) as error:
                logging.warning("skipping checkpoint %s: its config.json is unreadable (%s)", path, error)
                continue
            problem = incompatibility(self.config, saved)
            if problem:
                return None, None, f"{path} {problem}"
            try:
                return path, checkpoint.restore(local, self.learner.checkpoint_items()), None
            except Exception as error:  # TensorFlow reports damaged files with several error types
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                logging.warning("skipping checkpoint %s: it does not load (%s)", path, first_line[:200])
        return None, None, (f"none of the {len(candidates)} complete checkpoints under "
                            f"{checkpoint.checkpoint_root(self.config.logdir)} loads (see the warnings above)")

    def _restore_rank_state(self, path: str, counters: dict) -> None:
        """Collective: each rank takes back its RNG state, its update credit and (with --checkpoint_replay)
        its replay shard. Re-sharding rule when the rank count changed: rank r takes what rank r saved,
        if it saved anything; other ranks start from fresh RNGs and empty memories."""
        rank_states = counters.get("rank_states") or []
        saved = rank_states[self.world.rank] if self.world.rank < len(rank_states) else None
        if saved is not None:
            self.rng.bit_generator.state = saved["rng"]
            if "sample_rng" in saved:  # checkpoints before the sampling stream had its own generator lack it
                self.sample_rng.bit_generator.state = saved["sample_rng"]
        problem, restored = None, None
        shard = checkpoint.replay_shard_path(path, self.world.rank)
        if self.config.checkpoint_replay and self.store:  # every rank copies its own shard, if stored
            try:
                local_shard = os.path.join(self.logdir, "checkpoints", ".resumed", os.path.basename(shard))
                shard = local_shard if self.store.fetch_shard(shard, local_shard) else shard
            except storage.StorageError as error:
                problem = str(error)
        if self.config.checkpoint_replay and os.path.exists(shard) and problem is None:
            try:
                self.replay.load(shard)
                restored = self.replay.digest()  # as saved, so it can be compared with the saved digest
                # The envs restart with new episodes (train() resets them): end the stored ones here.
                self.replay.cut_episodes()
                # Env steps already stored but not yet paid for with updates; with an empty memory instead,
                # updates restart from zero credit once it is refilled, as in a fresh run.
                self.update_credit = int(saved["update_credit"]) if saved is not None else 0
            except (OSError, ValueError, KeyError) as error:
                problem = f"replay shard {shard} {error}"
        outcomes = distributed.gather_objects((problem, restored, len(self.replay)), "replay_restored")
        problem = next((outcome[0] for outcome in outcomes if outcome[0]), None)
        if problem:
            raise ConfigError(f"--resume: {problem}; resume without --checkpoint_replay or with the settings "
                              "that wrote it")
        if not self.world.is_chief:
            return
        if len(rank_states) != self.world.size:
            logging.warning("the checkpoint was written by %d ranks, this run has %d: ranks without saved state "
                            "start with fresh RNGs and empty replay memories", len(rank_states), self.world.size)
        digests = [outcome[1] for outcome in outcomes]
        expected = [state.get("replay_digest") for state in rank_states][:self.world.size]
        if self.config.checkpoint_replay and any(digests):
            logging.info("replay memories restored (transitions per rank %s; digests %s)",
                         [outcome[2] for outcome in outcomes], digests)
            if digests[:len(expected)] != expected:
                logging.error("restored replay digests %s differ from those saved %s", digests, expected)
        logging.info("resumed from %s at %s env steps, %s updates%s", path, f"{self.counters.env_steps:,}",
                     f"{self.counters.updates:,}",
                     "" if any(digests) else f"; refilling replay memory with {self.config.learning_starts:,} "
                                             "transitions per rank before updating again")

    def log_start(self) -> None:
        """Collective (the world description is gathered from all ranks); rank 0 logs and writes."""
        world_description = distributed.describe_world(self.world)
        if not self.world.is_chief:
            return
        logging.info("%s", world_description)
        if self.settings_logged:  # entered again after a change of world (--elastic)
            return
        self.settings_logged = True
        logging.info("replay memory: %s transitions per rank, %d bytes per transition",
                     f"{self.config.replay_capacity:,}", self.replay.bytes_per_transition)
        logging.info("settings:\n%s", self.config.to_json())
        with open(os.path.join(self.logdir, "config.json"), "w") as handle:
            handle.write(self.config.to_json())
        self._upload_logs()

    # --- the run -------------------------------------------------------------------------------------------
    def run(self) -> Counters:
        """Collective: the whole run, from start-up to the final checkpoint."""
        if self.config.elastic:
            from hvd_dqn.elastic import run_elastic

            return run_elastic(self)
        self.start()
        return self.train()

    def start(self) -> None:
        """Collective, once per job: agree on the log folder and the starting point (fresh or resumed)."""
        self.check_shared_logdir()
        self.restore_or_broadcast()

    def train(self) -> Counters:
        """Collective: the loop from the current counters to the end of training. Under --elastic it is
        entered again after each change of world, with the counters rolled back to the last commit; what
        is this rank's own (envs, replay memory, RNG, episode statistics) carries over."""
        from hvd_dqn.envs import env_seeds, frames_per_step
        from hvd_dqn.metrics import MetricsWriter

        config, world = self.config, self.world
        self.log_start()
        if world.is_chief and self.writer is None:
            if self.store:  # a resumed run, or a new rank 0 under --elastic, appends to the stored CSV files
                self.store.fetch_logs()
            self.writer = MetricsWriter(self.logdir, config.total_env_steps, self.counters.env_steps,
                                        frames_per_step(config.env_id))
        elif not world.is_chief and self.writer is not None:  # elastic: another rank is rank 0 now
            self.writer.close()
            self.writer = None
        self.last_log_env_steps = self.counters.env_steps
        if self.observation is None:
            # A resumed run starts new episodes (emulator states are not checkpointed), from seeds of their own.
            self.observation, _ = self.env.reset(seed=env_seeds(config.seed + world.rank, self.num_envs,
                                                                stream=self.counters.env_steps))
        if self.action_in_flight is not None:  # elastic: a failure struck between send and recv
            self._receive_and_store()
        self.unpaid_env_steps = None  # its credit was rolled back with the counters
        self.signals.install()
        poll_every = max(1, -(-STOP_POLL_ENV_STEPS_PER_RANK // self.num_envs))  # iterations
        stop, iteration, epsilon = False, 0, None
        while self.counters.env_steps < config.total_env_steps and not stop:
            previous_env_steps = self.counters.env_steps
            epsilon = self.epsilon(previous_env_steps) if self.env_epsilons is None else self.env_epsilons
            self.step(epsilon)
            stop = self._periodic_phases(previous_env_steps, epsilon)
            iteration += 1
            if not stop and iteration % poll_every == 0:
                stop = self._stop_requested(self.signals)
        self._pay_unpaid_iteration()
        if self.last_log_env_steps != self.counters.env_steps:  # the episodes since the last log point
            self._log(epsilon, None)
        if self.last_checkpoint_env_steps != self.counters.env_steps:
            self._checkpoint()
        if self.stopped_by and world.is_chief:
            logging.info("stopped by %s at %s env steps; checkpoint %s holds everything. To continue, run the "
                         "same command with --resume", self.stopped_by, f"{self.counters.env_steps:,}",
                         self._complete_checkpoints()[-1])
        if self.writer:
            self.writer.close()
            self.writer = None
            self._upload_logs()
        self.env.close()
        self.sampler.shutdown()
        return self.counters

    def _stop_requested(self, signals: StopSignals) -> bool:
        """Collective: whether any rank received SIGTERM or SIGINT; then every rank stops together."""
        votes = distributed.gather_from_ranks(np.array([1.0 if signals.received else 0.0]), "stop_votes")
        if votes.any():
            self.stopped_by = signals.received or "a signal to another rank"
            if self.world.is_chief:
                logging.info("received %s: finishing this step, then writing a checkpoint", self.stopped_by)
            return True
        return False

    # --- phases --------------------------------------------------------------------------------------------
    def step(self, epsilon) -> None:
        """Collective: one iteration of acting and learning, the periodic phases aside (also what the
        benchmark times): every env of every rank steps once, and the updates they pay for are made."""
        self.counters.env_steps += self.num_envs * self.world.size
        if self.overlap:
            self._act_overlapped(epsilon)
        else:
            self._act_and_store(epsilon)
            self._learn(self.counters.env_steps)

    def _act_and_store(self, epsilon) -> None:
        """Steps this rank's envs once and stores the transitions."""
        from hvd_dqn.actor import act_and_store

        self.observation, reward, done = act_and_store(self.env, self.actor, self.replay, self.observation, epsilon,
                                                       self.config.clip_rewards, self.config.terminal_on_life_loss)
        self._record_step(reward, done)

    def _act_overlapped(self, epsilon) -> None:
        """Acting and learning at once: the actions go to the emulators, which step on their own threads while
        this thread makes the updates the previous step paid for, then the step's transitions are stored.

        Those updates sample from the memory as it was after the previous step, exactly what the in-order
        loop's updates would see, with the RNG drawn in the same order; so the minibatches, the number of
        updates and the replay ratio are the same. Only the actions differ: they come from the weights
        before those updates (one step older)."""
        action = self.actor.select_actions(self.observation, epsilon)
        self.env.send(action)
        self.action_in_flight = action
        self._pay_unpaid_iteration()
        self._receive_and_store()
        self.unpaid_env_steps = self.counters.env_steps

    def _receive_and_store(self) -> None:
        from hvd_dqn.actor import store_step

        action, self.action_in_flight = self.action_in_flight, None
        self.observation, reward, done = store_step(self.replay, self.observation, action, self.env.recv(),
                                                    self.config.clip_rewards, self.config.terminal_on_life_loss)
        self._record_step(reward, done)

    def _pay_unpaid_iteration(self) -> None:
        """Overlap: makes the updates the last stored step paid for, if they are still to be made."""
        if self.unpaid_env_steps is not None:
            env_steps, self.unpaid_env_steps = self.unpaid_env_steps, None
            self._learn(env_steps)

    def _record_step(self, reward, done) -> None:
        finished_envs, finished_returns, finished_lengths = self.episodes.step(reward, done)
        if len(finished_envs):
            self.rank_metrics.record_episodes(self.counters.env_steps, finished_envs, finished_returns,
                                              finished_lengths)
            self.unreported_episodes += len(finished_envs)

    def _learn(self, env_steps: int) -> None:
        """Every train_frequency env steps of this rank buy one update; identical on all ranks, since all
        ranks step the same number of envs and their memories fill alike. `env_steps`: the job's env steps
        when the paying step was stored (prioritised replay's beta follows them)."""
        config = self.config
        if not self.replay_ready:
            self.replay_ready = self._every_replay_memory_ready()
            if not self.replay_ready:
                return
        self.update_credit += self.num_envs * self._ranks_sharing_an_update()
        count, self.update_credit = divmod(self.update_credit, config.train_frequency)
        beta = self.priority_beta(env_steps)
        batch_size = config.batch_size // self._ranks_sharing_an_update()
        draw = functools.partial(self.replay.sample, batch_size, self.sample_rng, beta)
        for batch in minibatches(draw, count, None if self.replay.priority else self.sampler):
            metrics = self.learner.update(batch)
            if batch.indices is not None:  # prioritised: this rank's new priorities from its TD errors
                self.replay.update_priorities(batch.indices, metrics["td_errors"])
            self.rank_metrics.record_update(metrics)
            self.counters.updates += 1
            if self.counters.updates % config.target_update_period == 0:
                self.learner.sync_target(config.target_update_tau)

    def _ranks_sharing_an_update(self) -> int:
        """--rank_scaling=updates: all N ranks' env steps pay for each update and each rank draws 1/N of its
        batch; "batch": a rank pays for its updates alone, with whole batches."""
        return self.world.size if self.config.rank_scaling == "updates" else 1

    def _every_replay_memory_ready(self) -> bool:
        """Whether every rank's memory holds its --learning_starts transitions (memories never shrink).

        In a fixed world all ranks fill alike, so each can tell alone. Under --elastic a rank that joined
        starts empty while the others are full: the ranks vote (one tiny allreduce per iteration, only until
        all are ready), or the full ranks would wait forever in an update the new one never joins."""
        # --rank_scaling=updates counts --learning_starts over the job, as one rank alone would.
        ready = len(self.replay) >= -(-self.config.learning_starts // self._ranks_sharing_an_update())
        if not self.config.elastic:
            return ready
        not_ready = distributed.sum_over_ranks(np.array([0.0 if ready else 1.0]), "replay_not_ready")[0]
        return not_ready == 0

    def _periodic_phases(self, previous_env_steps: int, epsilon: float) -> bool:
        """Evaluation, logging and checkpoints whose interval was crossed by the last iteration. Every rank
        reaches the same ones, since the counters are identical. Returns whether training should stop."""
        config = self.config

        def crossed(interval):
            return interval and self.counters.env_steps // interval > previous_env_steps // interval

        intervals = (config.eval_interval_env_steps, config.log_interval_env_steps,
                     config.checkpoint_interval_env_steps, config.elastic_commit_env_steps if self.commit else 0)
        if any(crossed(interval) for interval in intervals):
            self._pay_unpaid_iteration()  # overlap: what is evaluated, logged or saved includes every update

        eval_return, stop = None, False
        if crossed(config.eval_interval_env_steps):
            eval_return = self.evaluate_during_training()
            at_target = config.stop_at_eval_return is not None and eval_return >= config.stop_at_eval_return
            self.counters.evaluations_at_target = self.counters.evaluations_at_target + 1 if at_target else 0
            stop = self.counters.evaluations_at_target >= config.stop_consecutive_evals
            if stop and self.world.is_chief:
                logging.info("%d evaluation(s) in a row reached --stop_at_eval_return=%s at %s env steps; stopping",
                             self.counters.evaluations_at_target, config.stop_at_eval_return,
                             f"{self.counters.env_steps:,}")
        if crossed(config.log_interval_env_steps) or eval_return is not None:
            self._log(epsilon, eval_return)
            stop = stop or self._solved_in_training()
        if crossed(config.checkpoint_interval_env_steps) or stop:
            self._checkpoint()
        if self.commit is not None and crossed(config.elastic_commit_env_steps):
            self.commit()  # may raise HostsUpdatedInterrupt: a worker is joining (hvd_dqn.elastic)
        return stop

    def _solved_in_training(self) -> bool:
        """--stop_at_train_return: whether the latest --stop_train_episodes training episodes (every rank has
        them all after _log) average at least the target. The same answer on every rank."""
        config, recent = self.config, self.counters.recent_returns
        if config.stop_at_train_return is None or len(recent) < config.stop_train_episodes:
            return False
        mean = float(np.mean(recent))
        if mean < config.stop_at_train_return:
            return False
        if self.world.is_chief:
            logging.info("the last %d training episodes averaged %.1f >= --stop_at_train_return=%s at %s env steps; "
                         "stopping", len(recent), mean, config.stop_at_train_return, f"{self.counters.env_steps:,}")
        return True

    def evaluate_during_training(self) -> float:
        """Collective: greedy episodes split over ranks; returns the mean return over all of them."""
        from hvd_dqn.evaluation import run_episodes

        returns = np.zeros(0)
        if self.eval_env is not None:
            # Fixed evaluation seeds, distinct from the training envs', so evaluations compare like with like.
            seed = self.config.seed + self.world.rank + 1_000_000
            returns = run_episodes(self.actor, self.eval_env, self.config.eval_epsilon, seed).returns
        all_returns = distributed.gather_from_ranks(returns, "eval_returns")
        return float(np.mean(all_returns))

    def _log(self, epsilon, eval_return) -> None:
        from hvd_dqn.learner import current_learning_rate
        from hvd_dqn.metrics import episodes_as_played

        window, episode_rows = self.rank_metrics.reduce()
        self._sum_episode_counts()
        if self.config.stop_at_train_return is not None:
            played = [float(episode[3]) for episode in episodes_as_played(episode_rows)]
            recent = self.counters.recent_returns + played
            self.counters.recent_returns = recent[-self.config.stop_train_episodes:]
        self.last_log_env_steps = self.counters.env_steps
        if self.writer is None:
            return
        self.writer.write_episodes(episode_rows)
        if self.env_epsilons is not None:
            epsilon = self.mean_env_epsilon  # the mean over all ranks' envs
        row = dict(window, env_steps=self.counters.env_steps, updates=self.counters.updates,
                   episodes=self.counters.episodes, epsilon=epsilon,
                   learning_rate=current_learning_rate(self.learner.optimizer))
        self.writer.write(row, eval_return_mean=eval_return)
        self._upload_logs()

    def _upload_logs(self) -> None:
        """Rank 0, object-store logdir: uploads the logs as they are now. A failure is only a warning (the next
        log point uploads the whole files again); a checkpoint that cannot be stored stops the job."""
        if self.store is None or not self.world.is_chief:
            return
        try:
            self.store.upload_logs()
        except storage.StorageError as error:
            logging.warning("%s; the next log point tries again", error)

    def _sum_episode_counts(self) -> None:
        """Collective: adds every rank's newly finished episodes to the job's episode counter."""
        new = distributed.sum_over_ranks(np.array([self.unreported_episodes]), "episodes")[0]
        self.counters.episodes += int(new)
        self.unreported_episodes = 0

    def _checkpoint(self) -> None:
        """Collective: every rank reports its state (and, with --checkpoint_replay, writes its replay shard
        into the staging folder); rank 0 writes the rest and completes the checkpoint. A write that fails on
        any rank (a full disk) stops the job on every rank with one line naming it; the earlier checkpoints
        stay intact.

        The checkpoint records each replica's weight digest: the proof, for any run, that data parallelism
        kept the replicas identical. A mismatch is logged as an error; the checkpoint holds rank 0's.
        """
        config, env_steps = self.config, self.counters.env_steps
        self._sum_episode_counts()
        shard_error = None
        staging = checkpoint.staging_path(self.logdir, env_steps)
        if config.checkpoint_replay:
            if self.world.is_chief:
                checkpoint.create_staging(self.logdir, env_steps)
                if self.store:
                    shard_error = self._unmark_stored(env_steps)
            distributed.barrier("staging_created")
            try:
                if self.store and not self.world.is_chief:  # a mirror of its own: no folder is shared
                    checkpoint.create_staging(self.logdir, env_steps)
                shard = checkpoint.replay_shard_path(staging, self.world.rank)
                self.replay.save(shard)
                if self.store and not self.world.is_chief:
                    self.store.upload_shard(shard, checkpoint.checkpoint_name(env_steps))
                    shutil.rmtree(staging, ignore_errors=True)
            except OSError as error:
                shard_error = f"rank {self.world.rank} could not write its replay shard ({error.strerror or error})"
            except storage.StorageError as error:
                shard_error = f"rank {self.world.rank} could not store its replay shard ({error})"
        rank_state = dict(weights_digest=distributed.weights_digest(self.learner.online.variables),
                          rng=self.rng.bit_generator.state, sample_rng=self.sample_rng.bit_generator.state,
                          update_credit=self.update_credit,
                          replay_digest=self.replay.digest() if config.checkpoint_replay else None,
                          error=shard_error)
        rank_states = distributed.gather_objects(rank_state, "rank_states")
        problem = next((state["error"] for state in rank_states if state["error"]), None)
        path = None
        if self.world.is_chief and problem is None:
            digests = [state["weights_digest"] for state in rank_states]
            if len(set(digests)) != 1:
                logging.error("replicas differ at %s env steps (online-weight digests by rank: %s); the "
                              "gradient allreduce is not in effect", f"{env_steps:,}", digests)
            counters = dict(dataclasses.asdict(self.counters), world_size=self.world.size,
                            replica_weight_digests=digests, time=time.time(),
                            rank_states=[{key: state[key] for key in ("rng", "sample_rng", "update_credit",
                                                                      "replay_digest")}
                                         for state in rank_states])
            try:
                # A mirror keeps only the newest checkpoint locally; the store keeps --keep_checkpoints.
                path = checkpoint.save(self.logdir, self.learner.checkpoint_items(), counters,
                                       config.to_json(), 1 if self.store else config.keep_checkpoints)
                if self.store:
                    path = self.store.upload_checkpoint(path, config.keep_checkpoints)
            except (OSError, tf_errors()) as error:
                problem = f"rank 0 could not write it ({getattr(error, 'strerror', None) or error})"
            except storage.StorageError as error:
                problem = f"rank 0 could not store it ({error})"
        elif self.world.is_chief:
            shutil.rmtree(staging, ignore_errors=True)
        problem = distributed.broadcast_object(problem, "checkpoint_problem")
        if problem:
            raise CheckpointError(f"checkpoint at {env_steps:,} env steps in {checkpoint.checkpoint_root(config.logdir)}"
                                  f" failed: {problem}; the earlier checkpoints are intact")
        if path:
            logging.info("checkpoint written: %s", path)
        self.last_checkpoint_env_steps = env_steps

    def _unmark_stored(self, env_steps: int) -> Optional[str]:
        """Rank 0, object store: unmarks a stored checkpoint of the same env steps before the ranks upload
        shards into it; returns the problem, if any."""
        try:
            self.store.unmark(checkpoint.checkpoint_name(env_steps))
        except storage.StorageError as error:
            return f"rank 0 could not prepare it ({error})"
        return None


# Settings that decide the shapes of what a checkpoint holds; a resumed run must agree on them.
_CHECKPOINT_SHAPING_SETTINGS = ("env_id", "hidden_sizes", "full_action_space", "dueling", "mixed_precision",
                                "network", "conv_padding", "optimizer")


class CheckpointError(Exception):
    """A checkpoint could not be written; the job stops with this message on rank 0."""


def tf_errors():
    import tensorflow as tf

    return tf.errors.OpError


def rank_share(config: TrainConfig, world_size: int):
    """(envs, replay capacity) of one rank of `world_size`. Under --rank_scaling=updates --num_envs and
    --replay_capacity count over the job, like --batch_size, and are split evenly over the ranks, so that N
    ranks run the algorithm one rank would: N times as many envs would change it (each env's episodes would
    span N times as many updates: measured on CartPole, 32 envs in one rank stayed near 150 by 60k env steps
    where 4 envs played 500). Otherwise each rank has its own --num_envs and --replay_capacity."""
    if config.rank_scaling != "updates":
        return config.num_envs, config.replay_capacity
    if config.num_envs % world_size:
        raise ConfigError(f"--rank_scaling=updates: --num_envs={config.num_envs} (the job's envs) must split evenly "
                          f"over the {world_size} ranks")
    return config.num_envs // world_size, config.replay_capacity // world_size


def make_replay_memory(config: TrainConfig, spec, num_envs: int = None, capacity: int = None):
    """Frame-deduplicated memory for stacked frames, whole observations for vector ones; uniform or
    prioritised, one-step or n-step, as the config says; `num_envs` and `capacity` (default: the config's)
    are this rank's."""
    num_envs = num_envs or config.num_envs
    capacity = capacity or config.replay_capacity
    from hvd_dqn.frame_replay import FrameReplayMemory
    from hvd_dqn.networks import is_image_observation
    from hvd_dqn.replay import PrioritySettings, ReplayMemory

    priority = PrioritySettings(config.priority_alpha, config.priority_epsilon) if config.prioritized_replay else None
    if is_image_observation(spec.observation_shape, spec.observation_dtype):
        stack, *frame_shape = spec.observation_shape
        return FrameReplayMemory(capacity, num_envs, tuple(frame_shape), stack,
                                 config.gamma, config.n_step, priority)
    # MinAtar's bool grids are stored as bools (bit-packed); every other vector observation as float32.
    dtype = np.bool_ if spec.observation_dtype == np.bool_ else np.float32
    return ReplayMemory(capacity, num_envs, spec.observation_shape, dtype,
                        config.gamma, config.n_step, priority)


def incompatibility(config: TrainConfig, saved: TrainConfig):
    """Why `saved`'s checkpoint cannot be resumed by `config`, or None if it can."""
    differences = [f"--{name}={getattr(saved, name)!r} (this run: {getattr(config, name)!r})"
                   for name in _CHECKPOINT_SHAPING_SETTINGS if getattr(saved, name) != getattr(config, name)]
    if differences:
        return "was written with " + ", ".join(differences) + "; use another --logdir or the same settings"
    return None


def fail(message: str) -> None:
    """Ends this rank with exit code 2; rank 0 alone prints the one-line reason."""
    if distributed.launcher_rank() == 0:
        print(f"{PROGRAM}: error: {message}", file=sys.stderr, flush=True)
    else:
        # Every rank finds the same error, but a launcher stops the whole job when the first rank exits; a
        # short wait lets rank 0 be that rank, so its message is printed instead of being cut off.
        time.sleep(3)
    sys.exit(2)


def parse_flags(argv):
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        fail(str(error).replace("ERROR:: ", ""))


def main(argv) -> None:
    if len(argv) > 1:
        fail(f"unexpected arguments {' '.join(argv[1:])}; every setting is a --flag (see --helpfull)")
    rank = distributed.launcher_rank()
    if rank != 0:
        logging.set_verbosity(logging.WARNING)
    try:
        config = config_from_flags(check_logdir_writable=rank == 0)
        Trainer(config).run()
    except (ConfigError, CheckpointError) as error:
        fail(str(error))


def run() -> None:
    """Console-script entry point."""
    app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
    run()
