"""One rank's part of a data-parallel run: the loop, and the phases it calls by name.

Every rank owns its acting (its envs and the epsilon-greedy policy, `hvd_dqn.run.acting`) and an agent (DQN or
PQN, `hvd_dqn.agent.interface.Agent`: what it learns from, when it updates, and a replica of the Q-network). Each
iteration every env of every rank steps once, the agent stores the steps and makes the updates now due, in which
Horovod averages the gradients of all ranks' minibatches. The trainer knows the agent only through its interface.
Acting runs in order with learning or ahead of it on a thread of its own (`--pipeline`, on by default for Atari
with DQN; `hvd_dqn.run.pipeline`). Rank 0 broadcasts the initial state and alone writes checkpoints, metrics and
TensorBoard events; when a run stops early is `hvd_dqn.run.stopping`'s to say.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from hvd_dqn import collectives
from hvd_dqn.agent.episodes import run_episodes
from hvd_dqn.agent.factory import acts_ahead, agent_entry, make_agent
from hvd_dqn.agent.interface import Experience
from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.envs import frames_per_step, make_env_for, spec_of, steps_outside_python
from hvd_dqn.logdir import storage
from hvd_dqn.rank_split import check_world, rank_share
from hvd_dqn.run import horovod_setup
from hvd_dqn.run.acting import Acting
from hvd_dqn.run.elastic import run_elastic
from hvd_dqn.run.memory_check import check_memory_fits
from hvd_dqn.run.metrics import EpisodeTracker, MetricsWriter, RankMetrics, log_settings
from hvd_dqn.run.pipeline import ActingPipeline, lead_iterations
from hvd_dqn.run.progress import Counters, StopSignals, TrainingClock
from hvd_dqn.run.save_restore import Checkpointing
from hvd_dqn.run.stopping import StopRules


class Trainer:
    """One rank's part of a training run. `run()` is the whole run; `train()` the loop."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.use_pipeline = acts_ahead(config, steps_outside_python(config.env_id))
        # Horovod: one process per rank, its threads (and GPU) set before TensorFlow runs an op. The pipeline's
        # acting thread needs an inter-op thread of its own beside the learner's ops, or its inference waits for
        # each update (results/pipeline_benchmark/README.md).
        try:
            self.world = horovod_setup.init_horovod(config.intra_op_threads,
                                                    config.inter_op_threads + int(self.use_pipeline),
                                                    config.deterministic_ops, config.cores_per_rank)
        except horovod_setup.BindingError as error:
            raise ConfigError(str(error)) from None
        remote = storage.is_remote(config.logdir)  # s3://, gs://: every rank writes a local mirror, which uploads
        self.store = storage.LogdirMirror(config.logdir, self.world.rank) if remote else None
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

        # This rank's envs and replay capacity: the job's, split evenly (each rank's own with --counts_per_rank).
        num_envs, replay_capacity = rank_share(config, self.world.size)
        env = make_env_for(config, num_envs, self.world.local_size)
        spec = spec_of(env)
        check_memory_fits(config, spec, num_envs, replay_capacity, self.world)  # before anything big is allocated
        self.rank_metrics = RankMetrics(agent_entry(config).update_metrics)
        self.agent = make_agent(config, spec, num_envs, replay_capacity, self.world.size, sample_rng, self.rank_metrics)
        self.acting = Acting(env, self.agent.make_actor(self.rng, own_network=self.use_pipeline),
                             self.agent.epsilon_schedule())
        # The learner's network, acting with a generator of its own (made afresh from the evaluation seed at each
        # evaluation): evaluating leaves the training actor's stream untouched, so a run trains alike with or
        # without evaluations, and every evaluation draws alike.
        self.evaluation_actor = EpsilonGreedyActor(self.agent.q_network, spec.num_actions, np.random.default_rng(0))
        self.eval_env = None
        self.join_world()

        self.counters = Counters()
        self.clock = TrainingClock()  # seconds of training, continued across resumes
        self.last_log_env_steps = None
        self.last_checkpoint_env_steps = None
        self.pipeline: Optional[ActingPipeline] = None  # while train() runs with --pipeline
        self.stop_at_iteration = None  # a stop by signal: the iteration of this entry into train() to end at
        # What the loop keeps across the re-entries of an elastic run (a rank's own, never rolled back).
        self.episodes = EpisodeTracker(num_envs)
        self.unreported_episodes = 0  # episodes this rank finished since the counters were last summed
        self.signals = StopSignals()
        self.stop_rules = StopRules(config, self.signals)
        self.writer: Optional[MetricsWriter] = None  # rank 0's
        self.settings_logged = False
        self.resumed_log = False  # rank 0's first writer of a resumed job sets aside rows after the checkpoint
        self.commit = None  # with --elastic: commits the training state (hvd_dqn.run.elastic)

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
        resumed, acting_state = self.checkpoints.restore_or_broadcast(self.world, self.agent, self.rng)
        self.acting.actor.network_changed()  # restored or broadcast weights
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
            self.agent.memory.cut_episodes()  # the stored episodes will not go on

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
        agent stores the steps and makes the updates now due."""
        env_steps_before = self.counters.env_steps
        self.counters.env_steps += self.env_steps_per_iteration
        if self.pipeline is not None:
            self._store_and_learn(self.pipeline.next_experience())
            self.pipeline.finished(self.counters.updates)
        else:
            self._store_and_learn(self.acting.act(env_steps_before))

    # --- the phases of an iteration --------------------------------------------------------------------------
    def _store_and_learn(self, experience: Experience) -> None:
        self._store(experience)
        self.agent.learn(self.counters.env_steps, self.counters)

    def _store(self, experience: Experience) -> None:
        reward, done = self.agent.store(experience)
        finished_envs, finished_returns, finished_lengths = self.episodes.step(reward, done)
        if len(finished_envs):
            self.rank_metrics.record_episodes(self.counters.env_steps, finished_envs, finished_returns,
                                              finished_lengths, self.clock.seconds())
            self.unreported_episodes += len(finished_envs)

    def _periodic_phases(self, previous_env_steps: int) -> bool:
        """Evaluation, logging, checkpoints and elastic commits whose interval the last iteration crossed.
        Every rank reaches the same ones, since the counters are identical; the pipeline's acting thread has
        stopped here, so they see both sides at this iteration. Returns whether training should stop."""
        config = self.config

        def crossed(interval):
            return interval and self.counters.env_steps // interval > previous_env_steps // interval
        eval_return, stop = None, False
        if crossed(config.eval_interval_env_steps):
            eval_return = self.evaluate_during_training()
            stop = self.stop_rules.evaluations_reached_target(self.counters, eval_return, self.world.is_chief)
        # A checkpoint is also a log point, so that episodes.csv holds every episode up to it: a resume from it
        # after a crash then continues the CSV exactly (rows logged after it are set aside, see MetricsWriter).
        if crossed(config.log_interval_env_steps) or crossed(config.checkpoint_interval_env_steps) \
                or eval_return is not None:
            self._log(eval_return)
            stop = stop or self.stop_rules.solved_in_training(self.counters, self.world.is_chief)
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
        once the steps acting had already made are stored and learned from."""
        if self.stop_at_iteration is None and iteration % self.stop_rules.poll_every(self.acting.num_envs, self.agent.iterations_per_cycle) == 0 \
                and self.stop_rules.signal_to_any_rank(self.world.is_chief):
            self.stop_at_iteration = self.pipeline.stop_soon() if self.pipeline is not None else iteration
        return self.stop_at_iteration is not None and iteration >= self.stop_at_iteration

    # --- the pipeline ------------------------------------------------------------------------------------------
    def begin_acting(self) -> None:
        """Starts the pipeline's acting thread from the current weights and counters (with --pipeline)."""
        if not self.use_pipeline:
            return
        iterations_per_update = self.agent.iterations_per_update(self.acting.num_envs)
        lead = lead_iterations(self.config.pipeline_lead_env_steps, self.env_steps_per_iteration, iterations_per_update)
        self.pipeline = ActingPipeline(self.acting, self.agent.online, self.acting.actor.q_network,
                                       lead=lead, sync_updates=self.config.pipeline_sync_updates,
                                       start_env_steps=self.counters.env_steps,
                                       env_steps_per_iteration=self.env_steps_per_iteration,
                                       updates=self.counters.updates)
        self.pipeline.allow_until(self._iterations_to_next_phase())

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
        elastic failure) are stored, since the envs moved on; they are not learned from."""
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
                                        frames_per_step(config.env_id), resumed=self.resumed_log,
                                        update_metrics=self.rank_metrics.update_metrics)
        elif not world.is_chief and self.writer is not None:  # elastic: another rank is rank 0 now
            self.writer.close()
            self.writer = None
        self.resumed_log = False  # once per job: a later rank 0 (elastic) appends to what was logged since
        self.last_log_env_steps = self.counters.env_steps
        if self.acting.observation is None:
            # A resumed run whose emulators were not saved (Atari's, or without --checkpoint_replay) starts
            # new episodes, from seeds of their own.
            self.acting.reset(config.seed + world.rank, stream=self.counters.env_steps)
        self.stop_at_iteration = None
        self.signals.install()
        self.clock.start()
        self.begin_acting()

    def _finish_training(self) -> None:
        if self.last_log_env_steps != self.counters.env_steps:  # the episodes since the last log point
            self._log(None)
        if self.last_checkpoint_env_steps != self.counters.env_steps:
            self._checkpoint()
        self.clock.stop()
        if self.stop_rules.stopped_by and self.world.is_chief:
            logging.info("stopped by %s at %s env steps; checkpoint %s %s. To continue, run the same command with "
                         "--resume", self.stop_rules.stopped_by, f"{self.counters.env_steps:,}",
                         self.checkpoints.complete_checkpoints()[-1], self.checkpoints.contents(self.world.size))
        if self.writer:
            self.writer.close()
            self.writer = None
            self._upload_logs()
        self.acting.close()
        self.agent.close()

    # --- evaluation, logging and checkpoints -------------------------------------------------------------------
    def evaluate_during_training(self) -> float:
        """Collective: greedy episodes split over ranks; returns the mean return over all of them."""
        returns = np.zeros(0)
        if self.eval_env is not None:
            # Fixed evaluation seeds, distinct from the training envs', so evaluations compare like with like.
            seed = self.config.seed + self.world.rank + 1_000_000
            self.evaluation_actor.rng = np.random.default_rng(seed)
            returns = run_episodes(self.evaluation_actor, self.eval_env, self.config.eval_epsilon, seed).returns
        all_returns = collectives.gather_from_ranks(returns, "eval_returns")
        return float(np.mean(all_returns))

    def _log(self, eval_return) -> None:
        """Collective: every rank's episodes and update metrics since the last log point, reduced; rank 0 writes."""
        window, episode_rows = self.rank_metrics.reduce()
        self._sum_episode_counts()
        self.stop_rules.record_training_episodes(self.counters, episode_rows)
        self.last_log_env_steps = self.counters.env_steps
        if self.writer is None:
            return
        self.writer.write_episodes(episode_rows)
        # The epsilon the latest step explored with (Ape-X: the mean of the fixed per-env values).
        epsilon = self.mean_env_epsilon if self.acting.env_epsilons is not None \
            else self.acting.epsilon_schedule(max(0, self.counters.env_steps - self.env_steps_per_iteration))
        row = dict(window, env_steps=self.counters.env_steps, updates=self.counters.updates,
                   episodes=self.counters.episodes, epsilon=epsilon,
                   learning_rate=self.agent.current_learning_rate(), wall_time_s=self.clock.seconds())
        self.writer.write(row, eval_return_mean=eval_return)
        self._upload_logs()

    def _upload_logs(self) -> None:
        """Rank 0, object-store logdir: uploads the logs as they are now (a failure only warns)."""
        if self.store is not None and self.world.is_chief:
            self.store.try_upload_logs()

    def _sum_episode_counts(self) -> None:
        """Collective: adds every rank's newly finished episodes to the job's episode counter."""
        new = collectives.sum_over_ranks(np.array([self.unreported_episodes]), "episodes")[0]
        self.counters.episodes += int(new)
        self.unreported_episodes = 0

    def _checkpoint(self) -> None:
        """Collective: the job's checkpoint at the current counters (`Checkpointing.write`)."""
        self._sum_episode_counts()
        self.counters.wall_s = self.clock.seconds()  # rank 0's is saved
        acting_state = self.acting.state()
        if acting_state is not None:
            acting_state.update(self.episodes.state())
        self.checkpoints.write(self.world, self.counters, self.agent, self.rng, acting_state)
        self.last_checkpoint_env_steps = self.counters.env_steps

    def log_start(self) -> None:
        """Collective (the world description is gathered from all ranks); rank 0 logs and writes."""
        world_description = horovod_setup.describe_world(self.world)
        if not self.world.is_chief:
            return
        logging.info("%s", world_description)
        if self.settings_logged:  # entered again after a change of world (--elastic)
            return
        self.settings_logged = True
        log_settings(self.config, self.agent.memory_name, self.agent.memory, self.world.size, self.logdir)
        self._upload_logs()

    # --- the world -------------------------------------------------------------------------------------------
    def join_world(self) -> None:
        """What depends on this rank's place in the world: the agent's share of the updates, Ape-X's per-env
        epsilons and the evaluation envs (both split over ranks). Done at start-up and, with --elastic, after every
        change."""
        config, world = self.config, self.world
        check_world(config, world.size)
        self.agent.join_world(world.size)
        self.acting.env_epsilons = None  # with Ape-X exploration: this rank's share of the fixed per-env epsilons
        num_envs = self.acting.num_envs
        all_epsilons = config.agent_settings.fixed_env_epsilons(num_envs * world.size)
        if all_epsilons is not None:
            self.acting.env_epsilons = all_epsilons[world.rank * num_envs:][:num_envs]
            self.mean_env_epsilon = float(all_epsilons.mean())
        if self.eval_env is not None:
            self.eval_env.close()
        # Evaluation episodes are split over ranks; rank r plays its share in parallel envs.
        share = config.eval_episodes // world.size + int(world.rank < config.eval_episodes % world.size)
        self.eval_env = None
        if share and config.eval_interval_env_steps:
            self.eval_env = make_env_for(config, share, world.local_size)

