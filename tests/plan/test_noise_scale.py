"""The gradient noise scale (hvd_dqn.plan.noise_scale): its estimator on a problem whose answer is known, the
rank counts it predicts, the learner's gradient it is measured from, and the command on a real run's checkpoints."""
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.networks import build_mlp_q_network
from hvd_dqn.memories.replay import Batch
from hvd_dqn.plan import noise_scale

from conftest import REPO, python_module


def gaussian_gradients(true_gradient, noise_std, seed):
    """A hand-made problem: each example's gradient is `true_gradient` plus independent Gaussian noise of
    `noise_std` in every coordinate, so |G|^2 = |true_gradient|^2 and tr(Sigma) = dims x noise_std^2. A batch
    is a (B, dims) array of its examples' gradients; the batch's gradient is their mean, as a mean loss's is."""
    rng = np.random.default_rng(seed)

    def draw_batch(size):
        return true_gradient + noise_std * rng.standard_normal((size, len(true_gradient)))
    return draw_batch


def test_noise_scale_of_a_problem_whose_answer_is_known():
    true_gradient = np.array([3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # |G|^2 = 25
    noise_std = 5.0  # tr(Sigma) = 8 x 25 = 200, so B_simple = 8
    draw_batch = gaussian_gradients(true_gradient, noise_std, seed=0)
    rounds = noise_scale.measure(lambda batch: batch.mean(axis=0), lambda: draw_batch(4), batch_size=4,
                                 batches_per_round=8, rounds=400)
    combined = noise_scale.combine(rounds)
    assert combined.gradient_sq == pytest.approx(25.0, rel=0.1)
    assert combined.trace == pytest.approx(200.0, rel=0.1)
    assert combined.simple == pytest.approx(8.0, rel=0.15)
    # The naive figure, the mean squared norm of a small batch's gradient, is biased by tr(Sigma) / B = 50.
    naive = np.mean([float(g @ g) for g in (draw_batch(4).mean(axis=0) for _ in range(400))])
    assert naive == pytest.approx(75.0, rel=0.1)


def test_noise_scale_grows_as_the_true_gradient_shrinks():
    # The same noise with a gradient 10 times smaller: B_simple 100 times larger (8 -> 800).
    draw_batch = gaussian_gradients(np.array([0.3, 0.4, 0, 0, 0, 0, 0, 0]), 5.0, seed=1)
    combined = noise_scale.combine(noise_scale.measure(lambda batch: batch.mean(axis=0), lambda: draw_batch(64),
                                                       batch_size=64, batches_per_round=16, rounds=400))
    assert combined.simple == pytest.approx(800.0, rel=0.2)


def test_one_round_from_exact_expectations():
    # With the expected squared norms themselves, E|G_B|^2 = |G|^2 + tr(Sigma) / B, one round is exact.
    gradient_sq, trace = 2.0, 300.0
    estimate = noise_scale.estimate([gradient_sq + trace / 10] * 3, gradient_sq + trace / 40, small=10, big=40)
    assert estimate.gradient_sq == pytest.approx(gradient_sq)
    assert estimate.trace == pytest.approx(trace)
    assert estimate.simple == pytest.approx(150.0)
    with pytest.raises(ValueError):
        noise_scale.estimate([1.0], 1.0, small=40, big=40)
    assert math.isinf(noise_scale.NoiseEstimate(gradient_sq=-0.1, trace=5.0).simple)


def test_predicted_env_steps_ratio_and_rank_counts():
    # B_crit = 4 b: N ranks spend (1 + N/4) / (1 + 1/4) of one rank's env steps.
    assert noise_scale.env_steps_ratio(1, 32, 128) == pytest.approx(1.0)
    assert noise_scale.env_steps_ratio(4, 32, 128) == pytest.approx(2.0 / 1.25)
    assert noise_scale.env_steps_ratio(16, 32, 128) == pytest.approx(5.0 / 1.25)
    for ratio in (1.25, 1.5, 2.0):
        ranks = noise_scale.ranks_at_ratio(32, 128, ratio)
        assert noise_scale.env_steps_ratio(ranks, 32, 128) == pytest.approx(ratio)
    assert noise_scale.ranks_at_ratio(32, 128) == pytest.approx(2.25)
    assert noise_scale.env_steps_ratio(64, 32, math.inf) == 1.0  # no measurable gradient: no growth predicted


def test_learner_gradient_is_the_batch_mean_of_its_parts():
    # What the estimator relies on: the gradient of a mean loss over a batch is the mean of its halves' gradients.
    tf.keras.utils.set_random_seed(0)
    online, target = build_mlp_q_network((4,), 2, (16,), "online"), build_mlp_q_network((4,), 2, (16,), "target")
    learner = DQNLearner(online, target, tf.keras.optimizers.Adam(1e-3), double_dqn=True)
    rng = np.random.default_rng(0)
    size = 64
    batch = Batch(observation_tm1=rng.standard_normal((size, 4)).astype(np.float32),
                  action_tm1=rng.integers(0, 2, size).astype(np.int32),
                  reward_t=rng.standard_normal(size).astype(np.float32),
                  discount_t=np.full(size, 0.99, np.float32),
                  observation_t=rng.standard_normal((size, 4)).astype(np.float32))
    halves = [Batch(**{name: value[part] for name, value in vars(batch).items() if value is not None})
              for part in (slice(0, 32), slice(32, 64))]
    whole = learner.loss_gradient(batch)
    assert whole.shape == (sum(int(np.prod(v.shape)) for v in online.trainable_variables),)
    assert np.linalg.norm(whole) > 0
    np.testing.assert_allclose(whole, np.mean([learner.loss_gradient(half) for half in halves], axis=0), atol=1e-6)
    before = [v.numpy().copy() for v in online.variables]
    learner.loss_gradient(batch)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, online.variables))  # measuring is no step


def test_preconditioner_is_the_optimizers_own_division():
    from hvd_dqn.agent.optimizers import RootEpsilonRMSprop

    variables = [tf.Variable(tf.zeros((2, 3))), tf.Variable(tf.zeros(3))]
    second_moment = np.arange(1.0, 10.0).astype(np.float32)
    adam = tf.keras.optimizers.Adam(1e-3, epsilon=0.5)
    adam.build(variables)
    for velocity, part in zip(adam._velocities, (second_moment[:6].reshape(2, 3), second_moment[6:])):
        velocity.assign(part)
    np.testing.assert_allclose(noise_scale.preconditioner(adam, variables), 1 / (np.sqrt(second_moment) + 0.5),
                               rtol=1e-6)
    # Centred RMSprop divides by the root of the variance v - m^2 (MinAtar's DQN).
    rmsprop = RootEpsilonRMSprop(1e-3, rho=0.95, epsilon=0.01, centered=True)
    rmsprop.build(variables)
    average = 0.5 * np.sqrt(second_moment)
    for index, part in enumerate((slice(0, 6), slice(6, 9))):
        rmsprop._velocities[index].assign(second_moment[part].reshape(variables[index].shape))
        rmsprop._average_gradients[index].assign(average[part].reshape(variables[index].shape))
    np.testing.assert_allclose(noise_scale.preconditioner(rmsprop, variables),
                               1 / (np.sqrt(0.75 * second_moment) + 0.01), rtol=1e-6)


def test_preconditioned_noise_scale_of_a_known_problem():
    # Noise only along coordinates the preconditioner scales down by 10: tr(P Sigma) falls 100-fold (the scale
    # is applied to the gradient, sqrt(P) = 0.1 there), the true gradient lies where P = 1, so B falls 100-fold.
    draw_batch = gaussian_gradients(np.array([1.0, 0, 0, 0]), 0.0, seed=2)
    rng = np.random.default_rng(3)
    noisy = lambda size: draw_batch(size) + np.array([0, 4.0, 4.0, 4.0]) * rng.standard_normal((size, 4))  # noqa: E731
    plain = noise_scale.combine(noise_scale.measure(lambda b: b.mean(axis=0), lambda: noisy(8), 8, 8, 400))
    scale = np.array([1.0, 0.1, 0.1, 0.1])
    scaled = noise_scale.combine(noise_scale.measure(lambda b: b.mean(axis=0) * scale, lambda: noisy(8), 8, 8, 400))
    assert plain.simple == pytest.approx(48.0, rel=0.15)  # tr(Sigma) = 3 x 16, |G|^2 = 1
    assert scaled.simple == pytest.approx(0.48, rel=0.15)


def test_command_on_a_cartpole_run(tmp_path, capsys):
    logdir = tmp_path / "run"
    python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", f"--logdir={logdir}",
                                    "--total_env_steps=1600", "--checkpoint_replay",
                                    "--checkpoint_interval_env_steps=800", "--keep_checkpoints=10",
                                    "--eval_interval_env_steps=0"], timeout=300)
    out = tmp_path / "noise.json"
    assert noise_scale.main([str(logdir), "--rounds=4", "--batches_per_round=4", f"--json={out}"]) == 0
    assert "from N =" in capsys.readouterr().out
    measured = json.loads(out.read_text())
    assert [m["env_steps"] for m in measured["checkpoints"]] == [800, 1600]
    for m in measured["checkpoints"]:
        assert m["rank_batch"] == 128 and len(m["rounds"]) == 4 and m["trace"] > 0
        assert len(m["rounds_preconditioned"]) == 4 and m["noise_scale_preconditioned"] > 0
    assert measured["summary"]["ranks_at_ratio"]["1.25"] >= 1.25
    # A checkpoint without its replay memory (written without --checkpoint_replay) is named, not a traceback.
    from hvd_dqn.logdir import checkpoint

    newest = checkpoint.latest_checkpoint(str(logdir))
    os.remove(checkpoint.replay_shard_path(newest, 0))
    assert noise_scale.main([str(logdir), "--rounds=2", "--batches_per_round=2"]) == 2
    assert "holds no replay memory: train with --checkpoint_replay" in capsys.readouterr().err


def test_command_refuses_what_it_cannot_measure(tmp_path, capsys):
    assert noise_scale.main([str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert noise_scale.main([str(tmp_path)]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err
    assert noise_scale.main([str(tmp_path), "--batches_per_round=1"]) == 2
    assert "2 batches per round" in capsys.readouterr().err
