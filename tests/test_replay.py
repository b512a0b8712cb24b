import numpy as np
import pytest

from hvd_dqn.replay import ReplayMemory


def _add(memory, values):
    """Adds one transition per value; every field is derived from the value so contents are checkable."""
    values = np.asarray(values, dtype=np.float32)
    memory.add(values[:, None] * np.ones((1, 2), np.float32), values.astype(np.int32), values * 10,
               (values % 2 == 0).astype(np.float32), values[:, None] + 100)


def test_ring_wraps_around_and_overwrites_the_oldest():
    memory = ReplayMemory(capacity=5, observation_shape=(2,))
    _add(memory, [0, 1, 2])
    assert len(memory) == 3
    _add(memory, [3, 4, 5, 6])  # 5 and 6 overwrite slots 0 and 1
    assert len(memory) == 5
    batch = memory.gather(np.arange(5))
    np.testing.assert_array_equal(batch.action_tm1, [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(batch.observation_tm1[:, 0], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(batch.reward_t, [50, 60, 20, 30, 40])
    np.testing.assert_array_equal(batch.discount_t, [0, 1, 1, 0, 1])
    np.testing.assert_array_equal(batch.observation_t[:, 1], [105, 106, 102, 103, 104])
    _add(memory, [7])
    np.testing.assert_array_equal(memory.gather(np.arange(5)).action_tm1, [5, 6, 7, 3, 4])


def test_sampling_draws_only_stored_transitions():
    memory = ReplayMemory(capacity=100, observation_shape=(2,))
    _add(memory, [11, 12, 13])
    batch = memory.sample(1000, np.random.default_rng(0))
    assert set(batch.action_tm1.tolist()) == {11, 12, 13}
    # Fields of one sample stay together.
    np.testing.assert_array_equal(batch.reward_t, batch.action_tm1 * 10)


def test_bad_use_is_refused_with_a_reason():
    memory = ReplayMemory(capacity=2, observation_shape=(2,))
    with pytest.raises(ValueError, match="empty"):
        memory.sample(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="capacity 2"):
        _add(memory, [1, 2, 3])


def test_bytes_per_transition_counts_every_field():
    memory = ReplayMemory(capacity=10, observation_shape=(4,))
    assert memory.bytes_per_transition == 4 * 4 * 2 + 4 + 4 + 4
