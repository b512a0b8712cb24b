"""Acting ahead of learning on its own thread (--pipeline): the same algorithm, reproducible, and with no lead
exactly the in-order loop."""
import time

import numpy as np
import pytest

from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, horovodrun, python_module


def _train(logdir, flagfile, *flags, total=3200, interval=1600):
    python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / flagfile}", f"--logdir={logdir}",
                                    "--checkpoint_replay", "--deterministic_ops", f"--total_env_steps={total}",
                                    f"--checkpoint_interval_env_steps={interval}", "--eval_interval_env_steps=0",
                                    "--stop_at_train_return=inf", *flags], timeout=600)
    return [checkpoint.read_counters(path) for path in checkpoint.complete_checkpoints(str(logdir))]


def _same_run(one, other):
    """Checkpoint by checkpoint: counters, every rank's memory (its digest covers transitions, order and
    priorities), RNG streams and update credit, and the weights."""
    assert [saved["env_steps"] for saved in one] == [saved["env_steps"] for saved in other]
    for mine, theirs in zip(one, other):
        assert mine["updates"] == theirs["updates"] and mine["episodes"] == theirs["episodes"]
        assert mine["rank_states"] == theirs["rank_states"]
        assert mine["replica_weight_digests"] == theirs["replica_weight_digests"]


# CartPole with epsilon decaying within the run: from the first updates on, actions depend on the weights,
# so a pipeline that acted with other weights than its rule names would show in the memories.
CARTPOLE = ("cartpole.flags", "--epsilon_decay_env_steps=2000", "--learning_starts=500")


def test_with_no_lead_the_pipeline_is_the_in_order_loop(tmp_path):
    pipeline = _train(tmp_path / "pipeline", *CARTPOLE, "--pipeline=on", "--pipeline_lead_env_steps=0",
                      "--pipeline_sync_updates=1")
    in_order = _train(tmp_path / "in_order", *CARTPOLE, "--pipeline=off")
    assert [saved["env_steps"] for saved in pipeline] == [1600, 3200]
    assert pipeline[-1]["updates"] > 1000  # 4 updates per iteration of 8 envs once 500 transitions are stored
    _same_run(pipeline, in_order)


def test_pipeline_runs_with_a_lead_repeat_bit_for_bit(tmp_path):
    # One update per 16 env steps of 8 envs: acting may run 4 iterations (32 env steps) ahead by default, and
    # weights reach it every 4 updates.
    flags = (*CARTPOLE, "--pipeline=on", "--train_frequency=16", "--batch_size=32")
    first = _train(tmp_path / "first", *flags)
    second = _train(tmp_path / "second", *flags)
    _same_run(first, second)
    in_order = _train(tmp_path / "in_order", *CARTPOLE, "--pipeline=off", "--train_frequency=16", "--batch_size=32")
    assert first[-1]["updates"] == in_order[-1]["updates"]  # the same replay ratio
    assert first[-1]["rank_states"] != in_order[-1]["rank_states"]  # but actions from older weights


def test_a_lead_of_one_step_keeps_the_replay_ratio_and_acts_on_weights_one_step_older(tmp_path):
    # Atari's 4 envs: a lead of one env step rounds up to one step of every env (4 env steps), with the weights
    # copied after every update; the emulators step while the last step's updates are made (the benchmark's
    # per-step overlap).
    flags = ("atari_smoke.flags", "--noapex_exploration", "--epsilon_decay_env_steps=800")
    ahead = _train(tmp_path / "ahead", *flags, "--pipeline=on", "--pipeline_lead_env_steps=1",
                   "--pipeline_sync_updates=1", total=1600, interval=800)
    in_order = _train(tmp_path / "in_order", *flags, "--pipeline=off", total=1600, interval=800)
    assert ahead[-1]["updates"] == in_order[-1]["updates"]  # the same replay ratio
    assert ahead[-1]["rank_states"] != in_order[-1]["rank_states"]  # actions from weights one step older


def test_two_ranks_keep_identical_replicas_and_stop_together(tmp_path):
    logdir = tmp_path / "np2"
    horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                   f"--logdir={logdir}", "--pipeline=on", "--train_frequency=16", "--batch_size=32",
                   "--total_env_steps=3000", "--checkpoint_interval_env_steps=1000", "--eval_interval_env_steps=1000",
                   "--eval_episodes=2", "--stop_at_train_return=inf"], timeout=600)
    saved = [checkpoint.read_counters(path) for path in checkpoint.complete_checkpoints(str(logdir))]
    assert [counters["env_steps"] for counters in saved] == [1000, 2000, 3000]
    for counters in saved:
        assert len(set(counters["replica_weight_digests"])) == 1


def test_auto_pipelines_the_emulators_that_step_outside_python_only():
    from hvd_dqn.envs import steps_outside_python

    assert steps_outside_python("ALE/Pong-v5") and steps_outside_python("breakout")
    assert not steps_outside_python("CartPole-v1") and not steps_outside_python("MinAtar/Breakout-v0")


class _FailingEnv:
    """A vector env whose third step fails, as a crashed emulator would."""

    num_envs = 2

    def __init__(self):
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 3:
            raise RuntimeError("emulator crashed")
        return np.full((2, 1), self.steps, np.float32), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {}


class _RandomActor:
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def select_actions(self, observation, epsilon):
        return self.rng.integers(0, 2, size=len(observation))


def _pipeline(lead):
    import tensorflow as tf

    from hvd_dqn.agent.schedules import LinearSchedule
    from hvd_dqn.run.acting import Acting
    from hvd_dqn.run.pipeline import ActingPipeline

    acting = Acting(_FailingEnv(), _RandomActor(), LinearSchedule(1.0, 1.0, 1))
    acting.observation = np.zeros((2, 1), np.float32)
    network = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(2)])
    return ActingPipeline(acting, network, network, lead=lead, sync_updates=1, start_env_steps=0,
                          env_steps_per_iteration=2, updates=0)


def test_an_acting_failure_reaches_the_trainers_thread_with_its_cause():
    from hvd_dqn.run.pipeline import PipelineError

    pipeline = _pipeline(lead=5)
    pipeline.allow_until(10)
    try:
        first, second = pipeline.next_experience(), pipeline.next_experience()
        assert first.step_result[0][0, 0] == 1 and second.step_result[0][0, 0] == 2  # in order
        with pytest.raises(PipelineError, match="acting failed: emulator crashed"):
            pipeline.next_experience()
    finally:
        pipeline.close()


def test_acting_waits_within_its_lead_and_close_hands_back_what_was_not_taken():
    pipeline = _pipeline(lead=1)
    pipeline.allow_until(10)
    first = pipeline.next_experience()
    # Nothing is finished yet: acting may make iterations 1 and 2 (lead 1), not 3 (which would fail).
    deadline = time.monotonic() + 10
    while pipeline._produced < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # had acting gone beyond its lead, iteration 3 would have failed by now
    assert pipeline._produced == 2 and first.step_result[0][0, 0] == 1
    left = pipeline.close()
    assert [experience.step_result[0][0, 0] for experience in left] == [2]
