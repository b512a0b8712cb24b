"""Vector-env plumbing (SAME_STEP autoreset, final observations, seeds) and epsilon-greedy acting."""
import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.envs import (
    emulator_state,
    env_seeds,
    make_vector_env,
    restore_emulator_state,
    spec_of,
    true_next_observations,
)


def test_env_seeds_differ_within_and_across_ranks():
    rank0, rank1 = env_seeds(0 + 0, 4), env_seeds(0 + 1, 4)
    assert len(set(rank0 + rank1)) == 8
    assert env_seeds(5, 4) == env_seeds(5, 4)


def test_stored_next_observation_is_the_episodes_last_not_the_reset():
    env = make_vector_env("CartPole-v1", 3)
    assert spec_of(env).observation_shape == (4,) and spec_of(env).num_actions == 2
    env.reset(seed=env_seeds(0, 3))
    for _ in range(200):  # always pushing right ends an episode within a few dozen steps
        next_observation, _, terminated, truncated, info = env.step(np.ones(3, dtype=np.int64))
        done = terminated | truncated
        if done.any():
            break
    assert done.any()
    stored = true_next_observations(next_observation, done, info)
    ended = np.flatnonzero(done)[0]
    np.testing.assert_array_equal(stored[ended], info["final_obs"][ended])
    assert not np.array_equal(stored[ended], next_observation[ended])  # that one is the new episode's start
    # The last observation continues from the previous one; a fresh reset starts near 0 (|x| < 0.05).
    assert np.abs(next_observation[ended]).max() < 0.05 < np.abs(stored[ended]).max()
    running = np.flatnonzero(~done)
    np.testing.assert_array_equal(stored[running], next_observation[running])
    env.close()


class _FixedQ(tf.keras.Model):
    """Q-values that prefer action 2 for every observation."""

    def call(self, observation, training=False):
        return tf.tile(tf.constant([[0.0, 1.0, 5.0]]), [tf.shape(observation)[0], 1])


def test_epsilon_zero_is_greedy_and_one_is_uniform():
    actor = EpsilonGreedyActor(_FixedQ(), num_actions=3, rng=np.random.default_rng(0))
    observation = np.zeros((4000, 2), np.float32)
    np.testing.assert_array_equal(actor.select_actions(observation, 0.0), 2)
    counts = np.bincount(actor.select_actions(observation, 1.0), minlength=3) / 4000
    np.testing.assert_allclose(counts, [1 / 3] * 3, atol=0.03)


def test_epsilon_may_differ_per_environment():
    actor = EpsilonGreedyActor(_FixedQ(), num_actions=3, rng=np.random.default_rng(1))
    epsilon = np.array([0.0, 1.0] * 2000)
    actions = actor.select_actions(np.zeros((4000, 2), np.float32), epsilon)
    np.testing.assert_array_equal(actions[0::2], 2)
    assert np.mean(actions[1::2] == 2) == pytest.approx(1 / 3, abs=0.04)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "MinAtar/Breakout-v0"])
def test_saved_emulators_go_on_exactly_as_the_originals(env_id):
    """What a checkpoint keeps of a rank's Python envs: restored into a freshly made vector env (reset with
    other seeds), they give the same observations, rewards and episode ends as the originals, across the
    episode ends and autoresets that follow (their random generators and time-limit counts came along)."""
    original, fresh = make_vector_env(env_id, 3), make_vector_env(env_id, 3)
    original.reset(seed=env_seeds(0, 3))
    fresh.reset(seed=env_seeds(7, 3))
    actions = np.random.default_rng(0).integers(0, original.single_action_space.n, size=(400, 3))
    for action in actions[:20]:
        original.step(action)
    restore_emulator_state(fresh, emulator_state(original))
    ends = 0
    for action in actions[20:]:
        one, other = original.step(action), fresh.step(action)
        for mine, theirs in zip(one[:4], other[:4]):
            np.testing.assert_array_equal(mine, theirs)
        ends += int(one[2].sum() + one[3].sum())
    assert ends >= 3  # the comparison crossed episode ends


def test_emulators_of_another_env_are_refused_by_name():
    cartpole = make_vector_env("CartPole-v1", 2)
    with pytest.raises(ValueError, match="the saved emulators are not this run's 3 envs"):
        restore_emulator_state(make_vector_env("CartPole-v1", 3), emulator_state(cartpole))
    with pytest.raises(ValueError, match="not this run's 2 envs"):
        restore_emulator_state(make_vector_env("Acrobot-v1", 2), emulator_state(cartpole))


def test_the_greedy_action_tally_counts_only_the_states_of_running_episodes():
    """Q-values worked by hand: the finished env's state is not counted, shares and the median gap follow."""
    from hvd_dqn.agent.episodes import GreedyActionTally

    q_values = {0: [1.0, 0.5, 0.0], 1: [0.0, 2.0, 1.5], 2: [3.0, 3.0, 0.0]}  # keyed by the observation's value
    tally = GreedyActionTally(lambda observation: np.array([q_values[int(row[0])] for row in observation]),
                              ["NOOP", "FIRE", "LEFT"])
    tally(np.array([[0.0], [1.0], [2.0]]), np.array([True, True, False]))
    tally(np.array([[1.0], [1.0], [0.0]]), np.array([False, True, True]))
    summary = tally.summary()
    assert summary["states"] == 4  # two running envs at each of two steps
    assert summary["greedy_action_shares"] == {"NOOP": 0.5, "FIRE": 0.5, "LEFT": 0.0}
    assert summary["action_gap_median"] == pytest.approx(0.5)  # gaps 0.5, 0.5, 0.5, 0.5
    tally(np.array([[2.0], [2.0], [2.0]]), np.array([True, False, False]))  # a tie: argmax takes the first
    assert tally.summary()["greedy_action_shares"]["NOOP"] == pytest.approx(3 / 5, abs=1e-4)


def test_action_names_are_ales_for_atari_and_indices_elsewhere():
    from hvd_dqn.envs import action_names

    assert action_names("ALE/Breakout-v5", 4) == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    assert len(action_names("breakout", 18, full_action_space=True)) == 18
    assert action_names("CartPole-v1", 2) == ["0", "1"]
