"""Training, resuming and evaluating from Python, beside the command line (`python -m hvd_dqn.train`):

    from hvd_dqn.runner import Runner

    runner = Runner.from_flagfile("configs/cartpole.flags", logdir="runs/cartpole_py", total_env_steps=50_000)
    result = runner.train()                        # TrainResult(env_steps=50000, updates=..., episodes=..., ...)
    runner.resume(total_env_steps=100_000)         # continues from the newest checkpoint in the logdir
    scores = runner.evaluate(episodes=10)          # {"mean_return": ..., "returns": [...], ...}

A Runner holds one validated `TrainConfig`; `train` runs the same trainer and agent factory as the command line,
in this process, as one rank (under `horovodrun -np N python my_script.py` every rank runs it and the ranks
train as one job). Keyword settings are the command line's flag names. Bad settings raise `ConfigError`, whose
message names the setting, as the command line prints it.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from hvd_dqn.agent.configs import make_config, validate, with_settings
from hvd_dqn.config import ConfigError, TrainConfig


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """Where a run ended: the job's env steps, updates and episodes, seconds of training, and its logdir."""
    env_steps: int
    updates: int
    episodes: int
    wall_s: float
    logdir: str


class EvaluationError(Exception):
    """An evaluation could not be made or written (the message says why)."""


class Runner:
    """One experiment: a config, trained, resumed and evaluated in this process."""

    def __init__(self, config: Optional[TrainConfig] = None, **settings):
        # The settings named so far (the flagfile's, the keywords'): another agent's is refused at any value.
        self._given = frozenset(settings)
        self.config = _with_settings(config or make_config(), settings, given=self._given)

    @classmethod
    def from_flagfile(cls, flagfile: str, **settings) -> "Runner":
        """The config a flagfile (e.g. configs/cartpole.flags) gives the command line, with `settings` over it."""
        from hvd_dqn.flags import config_and_given_of_runs

        # The flagfile's config comes validated against the settings it names; it is validated again only when
        # keyword settings change it (a Runner built from a config of unknown origin validates it in __init__).
        config, given = config_and_given_of_runs("hvd_dqn.runner", flagfile, [])
        runner = cls.__new__(cls)
        runner._given = given | frozenset(settings)
        runner.config = _with_settings(config, settings, given=runner._given) if settings else config
        return runner

    def train(self, **settings) -> TrainResult:
        """Trains from the start (or, with resume=True, from the newest checkpoint) to total_env_steps; returns
        where the run ended. `settings` change this run's config (and the Runner's, for the calls after it).
        Collective under horovodrun: every rank calls it."""
        from absl import logging

        from hvd_dqn.run import horovod_setup
        from hvd_dqn.run.trainer import Trainer

        rank = horovod_setup.launcher_rank()
        self._given = self._given | frozenset(settings)
        self.config = _with_settings(self.config, settings, check_logdir_writable=rank == 0, given=self._given)
        logging.set_verbosity(logging.INFO if rank == 0 else logging.WARNING)
        counters = Trainer(self.config).run()
        return TrainResult(counters.env_steps, counters.updates, counters.episodes, counters.wall_s,
                           self.config.logdir)

    def resume(self, **settings) -> TrainResult:
        """Continues the run in the logdir from its newest checkpoint (raising its total_env_steps, if given)."""
        return self.train(resume=True, **settings)

    def evaluate(self, episodes: int = 10, epsilon: Optional[float] = None, seed: int = 12345,
                 checkpoint: Optional[str] = None, video: Optional[str] = None, greedy_actions: bool = False) -> dict:
        """Plays `episodes` episodes with the newest checkpoint of the logdir (or `checkpoint`), as
        `python -m hvd_dqn.evaluate` does; returns its summary."""
        if episodes <= 0:
            raise EvaluationError(f"episodes={episodes}: must be a positive integer")
        return evaluate_checkpoint(self.config.logdir, checkpoint, episodes, epsilon, seed, video, greedy_actions)


def _with_settings(config: TrainConfig, settings: dict, check_logdir_writable: bool = False,
                   given=()) -> TrainConfig:
    """`config` with `settings` (flag names) over it, validated (`given`: the settings the user named);
    ConfigError names an unknown or bad one."""
    if "hidden_sizes" in settings:
        settings = dict(settings, hidden_sizes=tuple(settings["hidden_sizes"]))
    return validate(with_settings(config, given, **settings), check_logdir_writable=check_logdir_writable,
                    given=given)


def evaluate_checkpoint(logdir: Optional[str], explicit: Optional[str], episodes: int, epsilon: Optional[float],
                        seed: int, video: Optional[str] = None, greedy_actions: bool = False) -> dict:
    """The summary of `episodes` episodes played by the online network of the checkpoint `logdir` or `explicit`
    names (`reload.load_named_checkpoint`), at `epsilon` (None: the training run's eval_epsilon); with
    `video`, also films one episode into that file; with `greedy_actions`, also says over the episodes' states
    how often the greedy policy picks each action and the median action gap (GreedyActionTally). Raises
    checkpoint.CheckpointNotFound or EvaluationError."""
    import numpy as np

    from hvd_dqn.agent import reload
    from hvd_dqn.agent.episodes import GreedyActionTally, run_episodes
    from hvd_dqn.agent.policy import EpsilonGreedyActor
    from hvd_dqn.envs import action_names, spec_of

    checkpoint_path, config, env, online, counters = reload.load_named_checkpoint(logdir, explicit, episodes)
    if epsilon is None:
        epsilon = config.eval_epsilon
    spec = spec_of(env)
    actor = EpsilonGreedyActor(online, spec.num_actions, np.random.default_rng(seed))
    tally = None
    if greedy_actions:  # Q-values of the network the actor takes its argmax of
        tally = GreedyActionTally(lambda observation: online(observation, training=False).numpy(),
                                  action_names(config.env_id, spec.num_actions, config.full_action_space))
    results = run_episodes(actor, env, epsilon, seed, watch=tally)
    env.close()
    summary = dict(results.summary(), env_id=config.env_id, epsilon=epsilon, seed=seed,
                   checkpoint=checkpoint_path, env_steps=counters["env_steps"], updates=counters["updates"],
                   returns=[float(value) for value in results.returns])
    if tally is not None:
        summary["greedy_actions"] = tally.summary()
    if video:
        from hvd_dqn.logdir.video import record_episode, write_video

        recorded = record_episode(actor, config, epsilon, seed)
        try:
            write_video(video, recorded.frames, recorded.frames_per_second)
        except OSError as error:
            raise EvaluationError(f"--video={video}: cannot write ({error.strerror or error})") from error
        summary["video"] = dict(path=video, episode_return=recorded.episode_return, length=recorded.length,
                                frames=len(recorded.frames), frames_per_second=recorded.frames_per_second)
    return summary
