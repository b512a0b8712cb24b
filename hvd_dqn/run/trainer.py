"""One rank's part of a data-parallel DQN run: the loop, and the phases it calls by name.

Every rank owns an acting side (its envs and the epsilon-greedy policy, `hvd_dqn.run.acting_side`), a learning side
(its replay memory and the updates its env steps pay for, `hvd_dqn.run.learning_side`) and a replica of the Q-network.
Each iteration every env of every rank steps once, the steps are stored and the updates they bought are
made, in which Horovod averages the gradients of all ranks' minibatches. Acting runs in order with learning,
or ahead of it on a thread of its own (`--pipeline`, on by default for Atari; `hvd_dqn.run.pipeline`), or
(`--overlap_acting`, Atari) with the emulators stepping on their own threads while the previous step's
updates are made. Rank 0 broadcasts the initial state and alone writes checkpoints, metrics and TensorBoard
events.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from hvd_dqn.agent.episodes import run_episodes
from hvd_dqn.agent.learner import DQNLearner, current_learning_rate, make_optimizer, rescale_learning_rate
from hvd_dqn.agent.networks import q_network_for
from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.agent.schedules import LinearSchedule, apex_epsilons, update_counted_schedules
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.envs import frames_per_step, make_env_for, spec_of, steps_in_background, steps_outside_python
from hvd_dqn.logdir import storage
from hvd_dqn.run import distributed
from hvd_dqn.run.acting_side import ActingSide, Experience
from hvd_dqn.run.elastic import run_elastic
from hvd_dqn.run.learning_side import LearningSide, make_replay_memory
from hvd_dqn.run.metrics import EpisodeTracker, MetricsWriter, RankMetrics, episodes_as_played
from hvd_dqn.run.pipeline import ActingPipeline
from hvd_dqn.run.progress import STOP_POLL_ENV_STEPS_PER_RANK, Counters, StopSignals, TrainingClock
from hvd_dqn.run.save_restore import Checkpointing


class Trainer:
    """One rank's part of a training run. `run()` is the whole run; `train()` the loop."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.use_pipeline = config.pipeline == "on" or (config.pipeline == "auto" and steps_outside_python(config.env_id))
        # Horovod: one process per rank, its threads (and GPU, if any) set before TensorFlow runs an op. The
        # pipeline's acting thread runs its inference beside the learner's ops: it needs an inter-op thread of
        # its own, or TensorFlow runs the two one after the other (measured: inference fell from 378 to 40 per
        # second beside a Nature-CNN update with one inter-op thread, and ran at 337 with two).
        try:
            self.world = distributed.init_horovod(config.intra_op_threads,
                                                  config.inter_op_threads + int(self.use_pipeline),
                                                  config.deterministic_ops, config.cores_per_rank)
        except distributed.BindingError as error:
            raise ConfigError(str(error)) from None
        # An object-store --logdir (s3://, gs://): every rank writes into a local mirror, which uploads.
        self.store = storage.LogdirMirror(config.logdir, self.world.rank) if storage.is_remote(config.logdir) \
            else None
        self.logdir = self.store.local if self.store else config.logdir  # where files are written first
        self.checkpoints = Checkpointing(config, self.store, self.logdir)
        rank_seed = config.seed + self.world.rank
        # Seeds Python, NumPy and TensorFlow: Keras 2 draws unseeded initializers from Python's `random`.
        tf.keras.utils.set_random_seed(rank_seed)  # only rank 0's initial weights survive the broadcast
        # Two streams: acting (epsilon-greedy draws) and minibatch sampling, so that acting ahead of learning
        # (or overlapped with it) cannot change the order of either side's draws.
        self.rng = np.random.default_rng(rank_seed)
        sample_rng = np.random.default_rng(np.random.SeedSequence([rank_seed, 1]))
        if config.mixed_precision:  # before the networks are built: their layers take the policy then
            tf.keras.mixed_precision.set_global_policy("mixed_float16")

        # This rank's envs and replay capacity: the job's, split evenly, under --rank_scaling=updates (the job
        # runs one rank's algorithm); each rank's own otherwise.
        num_envs, replay_capacity = rank_share(config, self.world.size)
        env = make_env_for(config, num_envs, self.world.local_size)
        spec = spec_of(env)
        online, target = (q_network_for(config, spec, name) for name in ("online", "target"))
        self.schedules = update_counted_schedules(config, self.world.size)
        self.learner = DQNLearner(online, target, self._optimizer(), config.double_dqn, config.huber_delta,
                                  xla=config.xla, fp16_allreduce=config.fp16_allreduce, loss=config.loss,
                                  grouped_allreduce=not config.elastic)
        self.rank_metrics = RankMetrics()
        self.learning = LearningSide(config, self.learner, make_replay_memory(config, spec, num_envs, replay_capacity),
                                     sample_rng, num_envs, self.rank_metrics, self.schedules.target_update_period)
        # The pipeline's acting thread gets a Q-network of its own, which the learner's weights reach at fixed
        # points; acting in order uses the online network itself.
        acting_network = q_network_for(config, spec, "acting") if self.use_pipeline else online
        self.acting = ActingSide(env, EpsilonGreedyActor(acting_network, spec.num_actions, self.rng),
                                 LinearSchedule(config.epsilon_start, config.epsilon_end,
                                                config.epsilon_decay_env_steps, config.epsilon_decay_start_env_steps))
        # --overlap_acting (when the pipeline is off): where the env can step in the background.
        self.overlap = not self.use_pipeline and config.overlap_acting and steps_in_background(env)
        self.evaluation_actor = EpsilonGreedyActor(online, spec.num_actions, self.rng)  # the learner's weights
        self.eval_env = None
        self._take_place_in_world()

        self.counters = Counters()
        self.clock = TrainingClock()  # seconds of training, continued across resumes
        self.last_log_env_steps = None
        self.last_checkpoint_env_steps = None
        self.pipeline: Optional[ActingPipeline] = None  # while train() runs with --pipeline
        self.unpaid_env_steps = None  # overlap: the job's env steps at a stored step whose updates are unmade
        self.stop_at_iteration = None  # a stop by signal: the iteration of this entry into train() to end at
        self.stopped_by = None  # the signal that ended the run early
        # What the loop keeps across the re-entries of an elastic run (a rank's own, never rolled back).
        self.episodes = EpisodeTracker(num_envs)
        self.unreported_episodes = 0  # episodes this rank finished since the counters were last summed
        self.signals = StopSignals()
        self.writer: Optional[MetricsWriter] = None  # rank 0's
        self.settings_logged = False
        self.resumed_log = False  # rank 0's first writer of a resumed job sets aside rows after the checkpoint
        self.commit = None  # with --elastic: commits the training state (hvd_dqn.run.elastic)

    def _optimizer(self):
        config = self.config
        return make_optimizer(config.learning_rate, config.adam_epsilon, config.max_grad_norm, self.world.size,
                              config.scale_lr_by_workers, self.schedules.lr_warmup_updates, elastic=config.elastic,
                              fp16_allreduce=config.fp16_allreduce, mixed_precision=config.mixed_precision,
                              optimizer=config.optimizer, rmsprop_rho=config.rmsprop_rho,
                              rmsprop_epsilon=config.rmsprop_epsilon, rmsprop_centered=config.rmsprop_centered,
                              lr_scale_rule=config.lr_scale_rule, learning_rate_end=config.learning_rate_end,
                              lr_decay_updates=self.schedules.lr_decay_updates)

    @property
    def env_steps_per_iteration(self) -> int:
        """The job's env steps in one iteration: every env of every rank steps once."""
        return self.acting.num_envs * self.world.size

    # --- the run -------------------------------------------------------------------------------------------
    def run(self) -> Counters:
        """Collective: the whole run, from start-up to the final checkpoint."""
        if self.config.elastic:
            return run_elastic(self)
        self.start()
        return self.train()

    def start(self) -> None:
        """Collective, once per job: agree on the log folder and the starting point (fresh or resumed)."""
        self.checkpoints.check_shared_logdir(self.world)
        resumed, acting_state = self.checkpoints.restore_or_broadcast(self.world, self.learning, self.rng)
        if resumed is not None:
            self.counters = resumed
            self.clock = TrainingClock(resumed.wall_s)
            self.last_checkpoint_env_steps = resumed.env_steps
            self.resumed_log = True
        if acting_state is not None:
            self._continue_episodes(acting_state)

    def _continue_episodes(self, acting_state) -> None:
        """A resume with the emulators saved: the episodes under way when the checkpoint was written go on,
        so the run continues as if it had never stopped. Emulators that do not load (another gymnasium,
        envs of another shape) start new episodes instead, as Atari's always do."""
        try:
            self.episodes.load_state(acting_state)
            self.acting.load_state(acting_state)
        except Exception as error:  # unpickling reports a foreign or damaged state with many error types
            logging.warning("rank %d: the saved emulator states do not load (%s: %s); starting new episodes",
                            self.world.rank, type(error).__name__, str(error)[:200])
            self.episodes = EpisodeTracker(self.acting.num_envs)
            self.acting.observation = None
            self.learning.replay.cut_episodes()  # the stored episodes will not go on

    def train(self) -> Counters:
        """Collective: the loop from the current counters to the end of training. Under --elastic it is
        entered again after each change of world, with the counters rolled back to the last commit; what
        is this rank's own (envs, replay memory, RNG, episode statistics) carries over."""
        self._begin_training()
        try:
            stop, iteration = False, 0
            while self.counters.env_steps < self.config.total_env_steps and not stop:
                previous_env_steps = self.counters.env_steps
                self.step()
                iteration += 1
                stop = self._periodic_phases(previous_env_steps) or self._stop_by_signal(iteration)
                self._let_acting_go_on(stop)
        finally:
            self.end_acting()
        self._finish_training()
        return self.counters

    def step(self) -> None:
        """Collective: one iteration (also what the benchmark times): every env of every rank steps once, the
        steps are stored and the updates they paid for are made."""
        env_steps_before = self.counters.env_steps
        self.counters.env_steps += self.env_steps_per_iteration
        if self.pipeline is not None:
            self._store_and_learn(self.pipeline.next_experience())
            self.pipeline.finished(self.counters.updates)
        elif self.overlap:
            self._act_overlapped(env_steps_before)
        else:
            self._store_and_learn(self.acting.act(env_steps_before))

    # --- the phases of an iteration --------------------------------------------------------------------------
    def _store_and_learn(self, experience: Experience) -> None:
        self._store(experience)
        self.learning.learn(self.counters.env_steps, self.counters)

    def _store(self, experience: Experience) -> None:
        reward, done = self.learning.store(experience)
        finished_envs, finished_returns, finished_lengths = self.episodes.step(reward, done)
        if len(finished_envs):
            self.rank_metrics.record_episodes(self.counters.env_steps, finished_envs, finished_returns,
                                              finished_lengths, self.clock.seconds())
            self.unreported_episodes += len(finished_envs)

    def _act_overlapped(self, env_steps_before: int) -> None:
        """--overlap_acting: the actions go to the emulators, which step on their own threads while this
        thread makes the updates the previous step paid for; then the step is stored.

        Those updates sample from the memory as it was after the previous step, exactly what the in-order
        loop's updates would see, with the RNG drawn in the same order; so the minibatches, the number of
        updates and the replay ratio are the same. Only the actions differ: they come from the weights
        before those updates (one step older)."""
        self.acting.send(env_steps_before)
        self._pay_unpaid_iteration()
        self._store(self.acting.receive())
        self.unpaid_env_steps = self.counters.env_steps

    def _pay_unpaid_iteration(self) -> None:
        """Overlap: makes the updates the last stored step paid for, if they are still to be made."""
        if self.unpaid_env_steps is not None:
            env_steps, self.unpaid_env_steps = self.unpaid_env_steps, None
            self.learning.learn(env_steps, self.counters)

    def _periodic_phases(self, previous_env_steps: int) -> bool:
        """Evaluation, logging, checkpoints and elastic commits whose interval the last iteration crossed.
        Every rank reaches the same ones, since the counters are identical; the pipeline's acting thread has
        stopped here, so they see both sides at this iteration. Returns whether training should stop."""
        config = self.config

        def crossed(interval):
            return interval and self.counters.env_steps // interval > previous_env_steps // interval

        if any(crossed(interval) for interval in self._phase_intervals()):
            self._pay_unpaid_iteration()  # overlap: what is evaluated, logged or saved includes every update
        eval_return, stop = None, False
        if crossed(config.eval_interval_env_steps):
            eval_return = self.evaluate_during_training()
            stop = self._evaluations_reached_target(eval_return)
        # A checkpoint is also a log point, so that episodes.csv holds every episode up to it: a resume from it
        # after a crash then continues the CSV exactly (rows logged after it are set aside, see MetricsWriter).
        if crossed(config.log_interval_env_steps) or crossed(config.checkpoint_interval_env_steps) \
                or eval_return is not None:
            self._log(eval_return)
            stop = stop or self._solved_in_training()
        if crossed(config.checkpoint_interval_env_steps) or stop:
            self._checkpoint()
        if self.commit is not None and crossed(config.elastic_commit_env_steps):
            self.commit()  # may raise HostsUpdatedInterrupt: a worker is joining (hvd_dqn.run.elastic)
        return stop

    def _phase_intervals(self):
        config = self.config
        return (config.eval_interval_env_steps, config.log_interval_env_steps, config.checkpoint_interval_env_steps,
                config.elastic_commit_env_steps if self.commit else 0)

    def _stop_by_signal(self, iteration: int) -> bool:
        """Collective, every few iterations: whether any rank received SIGTERM or SIGINT; then every rank
        stops together. With the pipeline the run ends a few iterations later, at the same one on every rank,
        once the steps acting had already made are stored and paid for."""
        poll_every = max(1, -(-STOP_POLL_ENV_STEPS_PER_RANK // self.acting.num_envs))  # iterations
        if self.stop_at_iteration is None and iteration % poll_every == 0 and self._stop_requested():
            self.stop_at_iteration = self.pipeline.stop_soon() if self.pipeline is not None else iteration
        return self.stop_at_iteration is not None and iteration >= self.stop_at_iteration

    def _stop_requested(self) -> bool:
        votes = distributed.gather_from_ranks(np.array([1.0 if self.signals.received else 0.0]), "stop_votes")
        if votes.any():
            self.stopped_by = self.signals.received or "a signal to another rank"
            if self.world.is_chief:
                logging.info("received %s: finishing the steps under way, then writing a checkpoint",
                             self.stopped_by)
            return True
        return False

    # --- the pipeline ------------------------------------------------------------------------------------------
    def begin_acting(self) -> None:
        """Starts the pipeline's acting thread from the current weights and counters (with --pipeline)."""
        if not self.use_pipeline:
            return
        self.pipeline = ActingPipeline(self.acting, self.learner.online, self.acting.actor.q_network,
                                       lead=self.pipeline_lead_iterations(), sync_updates=self.config.pipeline_sync_updates,
                                       start_env_steps=self.counters.env_steps,
                                       env_steps_per_iteration=self.env_steps_per_iteration,
                                       updates=self.counters.updates)
        self.pipeline.allow_until(self._iterations_to_next_phase())

    def pipeline_lead_iterations(self) -> int:
        """How many iterations acting may run ahead: --pipeline_lead_env_steps (the job's env steps), or by
        default enough to act on through two updates (acting goes on while the learner makes them)."""
        lead_env_steps = self.config.pipeline_lead_env_steps
        if lead_env_steps >= 0:
            return lead_env_steps // self.env_steps_per_iteration
        iterations_per_update = self.config.train_frequency / (self.acting.num_envs
                                                               * self.learning.ranks_sharing_an_update)
        return max(1, int(np.ceil(2 * iterations_per_update)))

    def _iterations_to_next_phase(self) -> int:
        """The iteration of this pipeline (counted from its start) at which the next periodic phase or the
        end of training comes: acting stops there until the phase is done."""
        now, per_iteration = self.counters.env_steps, self.env_steps_per_iteration
        ends = [self.config.total_env_steps] + [(now // interval + 1) * interval
                                                for interval in self._phase_intervals() if interval]
        return self.pipeline.consumed + max(1, min(-(-(end - now) // per_iteration) for end in ends))

    def _let_acting_go_on(self, stop: bool) -> None:
        """At a phase (the acting thread waits there), lets acting run on to the next one."""
        if self.pipeline is not None and not stop and self.stop_at_iteration is None \
                and self.pipeline.consumed >= self.pipeline.allowed:
            self.pipeline.allow_until(self._iterations_to_next_phase())

    def end_acting(self) -> None:
        """Stops the acting thread. Steps it made that were not taken (only when the loop ended by an error: an
        elastic failure) are stored, since the envs moved on; they are not paid for with updates."""
        if self.pipeline is None:
            return
        left, self.pipeline = self.pipeline.close(), None
        for experience in left:
            self._store(experience)

    # --- start and end of the loop -------------------------------------------------------------------------------
    def _begin_training(self) -> None:
        config, world = self.config, self.world
        self.log_start()
        if world.is_chief and self.writer is None:
            if self.store:  # a resumed run, or a new rank 0 under --elastic, appends to the stored CSV files
                self.store.fetch_logs()
            self.writer = MetricsWriter(self.logdir, config.total_env_steps, self.counters.env_steps,
                                        frames_per_step(config.env_id), resumed=self.resumed_log)
        elif not world.is_chief and self.writer is not None:  # elastic: another rank is rank 0 now
            self.writer.close()
            self.writer = None
        self.resumed_log = False  # once per job: a later rank 0 (elastic) appends to what was logged since
        self.last_log_env_steps = self.counters.env_steps
        if self.acting.observation is None:
            # A resumed run whose emulators were not saved (Atari's, or without --checkpoint_replay) starts
            # new episodes, from seeds of their own.
            self.acting.reset(config.seed + world.rank, stream=self.counters.env_steps)
        if self.acting.action_in_flight is not None:  # elastic: a failure struck between send and receive
            self._store(self.acting.receive())
        self.unpaid_env_steps = None  # its credit was rolled back with the counters
        self.stop_at_iteration = None
        self.signals.install()
        self.clock.start()
        self.begin_acting()

    def _finish_training(self) -> None:
        self._pay_unpaid_iteration()
        if self.last_log_env_steps != self.counters.env_steps:  # the episodes since the last log point
            self._log(None)
        if self.last_checkpoint_env_steps != self.counters.env_steps:
            self._checkpoint()
        self.clock.stop()
        if self.stopped_by and self.world.is_chief:
            logging.info("stopped by %s at %s env steps; checkpoint %s holds everything. To continue, run the "
                         "same command with --resume", self.stopped_by, f"{self.counters.env_steps:,}",
                         self.checkpoints.complete_checkpoints()[-1])
        if self.writer:
            self.writer.close()
            self.writer = None
            self._upload_logs()
        self.acting.close()
        self.learning.close()

    # --- evaluation, logging and checkpoints -------------------------------------------------------------------
    def evaluate_during_training(self) -> float:
        """Collective: greedy episodes split over ranks; returns the mean return over all of them."""
        returns = np.zeros(0)
        if self.eval_env is not None:
            # Fixed evaluation seeds, distinct from the training envs', so evaluations compare like with like.
            seed = self.config.seed + self.world.rank + 1_000_000
            returns = run_episodes(self.evaluation_actor, self.eval_env, self.config.eval_epsilon, seed).returns
        all_returns = distributed.gather_from_ranks(returns, "eval_returns")
        return float(np.mean(all_returns))

    def _evaluations_reached_target(self, eval_return: float) -> bool:
        config = self.config
        at_target = config.stop_at_eval_return is not None and eval_return >= config.stop_at_eval_return
        self.counters.evaluations_at_target = self.counters.evaluations_at_target + 1 if at_target else 0
        stop = self.counters.evaluations_at_target >= config.stop_consecutive_evals
        if stop and self.world.is_chief:
            logging.info("%d evaluation(s) in a row reached --stop_at_eval_return=%s at %s env steps; stopping",
                         self.counters.evaluations_at_target, config.stop_at_eval_return,
                         f"{self.counters.env_steps:,}")
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

    def _log(self, eval_return) -> None:
        """Collective: every rank's episodes and update metrics since the last log point, reduced; rank 0 writes."""
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
        # The epsilon the latest step explored with (Ape-X: the mean of the fixed per-env values).
        epsilon = self.mean_env_epsilon if self.acting.env_epsilons is not None \
            else self.acting.epsilon_schedule(max(0, self.counters.env_steps - self.env_steps_per_iteration))
        row = dict(window, env_steps=self.counters.env_steps, updates=self.counters.updates,
                   episodes=self.counters.episodes, epsilon=epsilon,
                   learning_rate=current_learning_rate(self.learner.optimizer), wall_time_s=self.clock.seconds())
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
        """Collective: the job's checkpoint at the current counters (`Checkpointing.write`)."""
        self._sum_episode_counts()
        self.counters.wall_s = self.clock.seconds()  # rank 0's is saved
        acting_state = self.acting.state()
        if acting_state is not None:
            acting_state.update(self.episodes.state())
        self.checkpoints.write(self.world, self.counters, self.learning, self.rng, acting_state)
        self.last_checkpoint_env_steps = self.counters.env_steps

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
                     f"{self.learning.replay.capacity:,}", self.learning.replay.bytes_per_transition)
        logging.info("settings:\n%s", self.config.to_json())
        if self.config.scale_schedules_by_workers:
            logging.info("--scale_schedules_by_workers, %d ranks: %s", self.world.size, self.schedules)
        elif self.config.rank_scaling == "batch" and self.world.size > 1 and not self.config.elastic:
            # Legitimate, but the worst rule the scaling study measured (CartPole, 4 ranks: no seed of 3 solved).
            logging.warning("--rank_scaling=batch with %d ranks makes %d times fewer updates per env step, so "
                            "--target_update_period and the step-size warm-up and decay (counted in updates) span "
                            "%d times the env steps they span at one rank; --scale_schedules_by_workers keeps "
                            "them on one rank's clock", self.world.size, self.world.size, self.world.size)
        with open(os.path.join(self.logdir, "config.json"), "w") as handle:
            handle.write(self.config.to_json())
        self._upload_logs()

    # --- the world -------------------------------------------------------------------------------------------
    def _take_place_in_world(self) -> None:
        """What depends on this rank's place in the world: the update share, Ape-X's per-env epsilons and the
        evaluation envs (both split over ranks). Done at start-up and, with --elastic, after every change."""
        config, world = self.config, self.world
        if config.rank_scaling == "updates" and config.batch_size % world.size:
            raise ConfigError(f"--rank_scaling=updates: --batch_size={config.batch_size} (the global batch) must "
                              f"split evenly over the {world.size} ranks")
        self.learning.share_updates_over(world.size)
        self.acting.env_epsilons = None  # with Ape-X exploration: this rank's share of the fixed per-env epsilons
        if config.apex_exploration:
            num_envs = self.acting.num_envs
            all_epsilons = apex_epsilons(num_envs * world.size, config.apex_epsilon_base, config.apex_alpha)
            self.acting.env_epsilons = all_epsilons[world.rank * num_envs:][:num_envs]
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
        old_size = self.world.size
        self.world = distributed.current_world()
        self._take_place_in_world()  # also: no rank updates until all have --learning_starts again
        # Only a --scale_lr_by_workers rate follows the world; a decay-only schedule keeps its scale of 1.
        rescaled = self.config.scale_lr_by_workers and rescale_learning_rate(
            self.learner.optimizer, self.world.size, self.config.lr_scale_rule)
        # Only rank 0 reports progress (main() quiets the others); a rank promoted to rank 0 takes over.
        logging.set_verbosity(logging.INFO if self.world.is_chief else logging.WARNING)
        if self.world.is_chief:
            logging.warning("world changed from %d to %d ranks%s; going on from the last commit (%s env steps, "
                            "%s updates)", old_size, self.world.size, "; learning rate rescaled" if rescaled else "",
                            f"{self.counters.env_steps:,}", f"{self.counters.updates:,}")


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
