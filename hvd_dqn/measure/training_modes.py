"""The trainer's own iteration (acting, storing and the updates then due) in each way of overlapping acting
with learning, side by side, in a child process of the benchmark: TensorFlow's thread pools are fixed per
process, and the pipeline needs an inter-op thread for each side."""
from __future__ import annotations

import functools
import json
import os

import numpy as np

from hvd_dqn.measure.timing import rename, side_by_side


def training_mode_rates(argv, balanced_train_frequency: int, seconds: float, rounds: int) -> dict:
    """The full-training figures, measured by a child process of this benchmark with the same flags.

    A process of its own, since TensorFlow's thread pools are the process's and fixed once it starts: the
    stages above are timed with one inter-op thread (one core's worth each), but the pipeline needs two, one
    for each side's ops (with one, its acting thread's inference waits for the learner's ops: measured, 40
    inferences/s beside a Nature-CNN update instead of 337). All three modes are timed there alike."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hvd_dqn_benchmark_") as folder:
        report = os.path.join(folder, "training.json")
        command = [sys.executable, "-m", "hvd_dqn.measure.benchmark", *argv[1:], "--part=training",
                   f"--balanced_train_frequency={balanced_train_frequency}", f"--round_seconds={seconds}",
                   f"--rounds={rounds}", f"--json={report}"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the full-training part failed (exit {result.returncode}): {tail}")
        with open(report) as handle:
            return json.load(handle)


def training_part(config, balanced_train_frequency: int, seconds: float, rounds: int, report: str) -> None:
    """In the child process: the trainer's own iteration in each mode, at the preset's replay ratio and at
    --balanced_train_frequency, written to `report` as JSON."""
    from hvd_dqn.envs import probe_spec

    spec = probe_spec(config)
    rng = np.random.default_rng(config.seed)
    results = rename(_training_rates(config, spec, rng, seconds, rounds), pipeline="train_steps_per_s",
                      overlap="train_steps_per_s_overlap", in_order="train_steps_per_s_no_overlap")
    balanced = config.replace(train_frequency=balanced_train_frequency)
    results.update(rename(_training_rates(balanced, spec, rng, seconds, rounds), pipeline="balanced_steps_per_s",
                           overlap="balanced_steps_per_s_overlap", in_order="balanced_steps_per_s_in_order"))
    with open(report, "w") as handle:
        json.dump(results, handle)


TRAINING_MODES = {  # name: the settings it trains with
    "pipeline": {"pipeline": "on"},  # acting ahead on its own thread (hvd_dqn.run.pipeline): Atari's default
    # One step of every env ahead, weights copied after every update: the emulators step while the previous
    # step's updates are made.
    "overlap": {"pipeline": "on", "pipeline_lead_env_steps": 1, "pipeline_sync_updates": 1},
    "in_order": {"pipeline": "off"},
}


def _training_rates(config, spec, rng: np.random.Generator, seconds: float, rounds: int) -> dict:
    """Side by side: a trainer of `config` in each of TRAINING_MODES, one core's worth of threads each stage,
    memories full; their env steps per second, by mode name. Each round of a mode with an acting thread starts
    from an empty queue (a new thread), so acting done ahead while the other modes were timed is not counted."""
    trainers = {name: _full_trainer(config, spec, rng, settings) for name, settings in TRAINING_MODES.items()}
    try:
        def restart_acting(trainer):
            trainer.end_acting()
            trainer.begin_acting()

        steps = {name: functools.partial(_one_iteration, trainer) for name, trainer in trainers.items()}
        return side_by_side(steps, seconds, rounds, before_round={
            name: functools.partial(restart_acting, trainer) for name, trainer in trainers.items()
            if trainer.use_pipeline})
    finally:
        for trainer in trainers.values():
            trainer.end_acting()
            trainer.acting.close()
            trainer.agent.close()


def _full_trainer(config, spec, rng: np.random.Generator, settings: dict):
    """A Trainer of `config` with its memory full, ready to step: no evaluation, logging or checkpoints,
    exploration at its final epsilon, the update and inference traced."""
    import tempfile

    from hvd_dqn.run.trainer import Trainer

    trainer = Trainer(config.replace(
        **settings, env_threads=1, intra_op_threads=1,
        inter_op_threads=2 - int(settings["pipeline"] == "on"),  # two in all: the trainer adds one for the pipeline
        eval_interval_env_steps=0, log_interval_env_steps=0, checkpoint_interval_env_steps=0,
        total_env_steps=2**62, epsilon_start=config.epsilon_end,
        logdir=tempfile.mkdtemp(prefix="hvd_dqn_benchmark_")))
    fill_replay(trainer.agent.memory, spec, trainer.acting.num_envs, rng)
    trainer.acting.reset(config.seed, stream=0)
    trainer.begin_acting()
    for _ in range(3):  # past the readiness check, with the update and inference traced
        trainer.step()
    return trainer


def _one_iteration(trainer) -> int:
    trainer.step()
    return trainer.env_steps_per_iteration


def fill_replay(replay, spec, num_envs: int, rng: np.random.Generator) -> None:
    """Fills `replay` to capacity with random observations and an episode end about every 500 steps."""
    observation = rng.integers(0, 255, size=(num_envs,) + spec.observation_shape).astype(spec.observation_dtype)
    for _ in range(replay.capacity // num_envs + 1):
        ended = rng.random(num_envs) < 0.002
        replay.add(observation, rng.integers(0, spec.num_actions, num_envs), rng.normal(size=num_envs),
                   (~ended).astype(np.float32), observation, ended)
