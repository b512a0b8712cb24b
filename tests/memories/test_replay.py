"""The vector-observation replay memory, n-step returns and prioritised sampling, with exact values."""
import numpy as np
import pytest

from hvd_dqn.memories.replay import PrioritySettings, ReplayMemory
from hvd_dqn.memories.sum_tree import SumTree

GAMMA = 0.5  # powers of a half keep the expected sums exact


def _add(memory, values, ended=None, discount=None):
    """Adds one step per env; every field is derived from the value so contents are checkable."""
    values = np.asarray(values, dtype=np.float32)
    ended = np.zeros(len(values), bool) if ended is None else np.asarray(ended, bool)
    discount = np.ones(len(values), np.float32) if discount is None else np.asarray(discount, np.float32)
    memory.add(values[:, None] * np.ones((1, 2), np.float32), values.astype(np.int32) % 256, values * 10,
               discount, values[:, None] + 100, ended)


def _all(memory, env, positions):
    return memory.gather(np.full(len(positions), env), np.asarray(positions))


def test_each_env_owns_a_ring_segment_that_wraps_around():
    memory = ReplayMemory(capacity=6, num_envs=2, observation_shape=(2,), gamma=GAMMA)
    assert memory.segment == 3
    for step in range(5):  # env 0 sees 0, 1, 2, 3, 4; env 1 sees 10, 11, ...
        _add(memory, [step, 10 + step])
    assert len(memory) == 6
    batch = _all(memory, 0, [2, 3, 4])  # positions 0 and 1 were overwritten
    np.testing.assert_array_equal(batch.action_tm1, [2, 3, 4])
    np.testing.assert_array_equal(batch.observation_tm1[:, 0], [2, 3, 4])
    np.testing.assert_array_equal(batch.reward_t, [20, 30, 40])
    np.testing.assert_array_equal(batch.discount_t, [GAMMA] * 3)
    np.testing.assert_array_equal(batch.observation_t[:, 1], [102, 103, 104])
    np.testing.assert_array_equal(_all(memory, 1, [4]).action_tm1, [14])
    ok = memory.sampleable(np.zeros(5, np.int64), np.arange(5))
    assert ok.tolist() == [False, False, True, True, True]


def test_sampling_draws_only_stored_transitions():
    memory = ReplayMemory(capacity=100, num_envs=3, observation_shape=(2,))
    _add(memory, [11, 12, 13])
    batch = memory.sample(1000, np.random.default_rng(0))
    assert set(batch.action_tm1.tolist()) == {11, 12, 13}
    np.testing.assert_array_equal(batch.reward_t, batch.action_tm1 * 10)  # fields of one sample stay together
    assert batch.weights is None and batch.indices is None  # uniform replay


# One env, rewards 1, 2, 4, 8, ... (value v gives reward 10 v; values are powers of two here).
N_STEP_CASES = [
    # (per-step: ended, discount), start position, expected (reward, discount, next obs value, action)
    ("no boundary", [(False, 1)] * 5, 0, (10 * (1 + GAMMA * 2 + GAMMA**2 * 4), GAMMA**3, 4 + 100)),
    ("terminal at step 2", [(False, 1), (True, 0), (False, 1), (False, 1), (False, 1)], 0,
     (10 * (1 + GAMMA * 2), 0.0, 2 + 100)),
    ("truncated at step 2", [(False, 1), (True, 1), (False, 1), (False, 1), (False, 1)], 0,
     (10 * (1 + GAMMA * 2), GAMMA**2, 2 + 100)),
    ("life lost (terminal for learning) at step 1", [(False, 0), (False, 1), (False, 1), (False, 1), (False, 1)], 0,
     (10 * 1, 0.0, 1 + 100)),
    ("starts after an episode end", [(True, 0), (False, 1), (False, 1), (False, 1), (False, 1)], 1,
     (10 * (2 + GAMMA * 4 + GAMMA**2 * 8), GAMMA**3, 8 + 100)),
]


@pytest.mark.parametrize("name, steps, start, expected", N_STEP_CASES, ids=[case[0] for case in N_STEP_CASES])
def test_three_step_returns_stop_at_episode_ends_and_learning_terminals(name, steps, start, expected):
    memory = ReplayMemory(capacity=20, num_envs=1, observation_shape=(2,), gamma=GAMMA, n_step=3)
    for index, (ended, discount) in enumerate(steps):
        _add(memory, [2**index], ended=[ended], discount=[discount])
    batch = _all(memory, 0, [start])
    reward, discount, next_value = expected
    assert batch.reward_t[0] == pytest.approx(reward)
    assert batch.discount_t[0] == pytest.approx(discount)
    assert batch.observation_t[0, 0] == next_value  # the observation after the last step taken
    assert batch.action_tm1[0] == 2**start and batch.observation_tm1[0, 0] == 2**start


def test_an_n_step_transition_waits_until_its_steps_are_written_or_its_episode_ends():
    memory = ReplayMemory(capacity=20, num_envs=1, observation_shape=(2,), gamma=GAMMA, n_step=3)
    for value, ended in [(1, False), (2, False), (3, False), (4, True), (5, False)]:
        _add(memory, [value], ended=[ended], discount=[0.0 if ended else 1.0])
    # 0 and 1 have 3 steps; 2 and 3 end inside their windows at the termination; 4 has 1 step of 3.
    assert memory.sampleable(np.zeros(5, np.int64), np.arange(5)).tolist() == [True, True, True, True, False]


def test_n_step_returns_never_cross_between_interleaved_envs():
    memory = ReplayMemory(capacity=40, num_envs=2, observation_shape=(2,), gamma=GAMMA, n_step=2)
    for step in range(4):  # env 0 rewards 10, 20, 30, 40; env 1 rewards 1000, 1010, ...
        _add(memory, [1 + step, 100 + step], ended=[False, step == 1], discount=[1, 0 if step == 1 else 1])
    env0 = _all(memory, 0, [0, 1, 2])
    np.testing.assert_allclose(env0.reward_t, [10 + GAMMA * 20, 20 + GAMMA * 30, 30 + GAMMA * 40])
    env1 = _all(memory, 1, [0, 1, 2])
    np.testing.assert_allclose(env1.reward_t, [1000 + GAMMA * 1010, 1010, 1020 + GAMMA * 1030])
    np.testing.assert_allclose(env1.discount_t, [0.0, 0.0, GAMMA**2])


def test_sum_tree_totals_and_finds_prefix_sums():
    tree = SumTree(5)
    tree.set(np.arange(5), np.array([1.0, 2.0, 3.0, 0.0, 4.0]))
    assert tree.total == 10.0
    # Leaf i covers [sum(p[:i]), sum(p[:i+1])): 0 -> [0,1), 1 -> [1,3), 2 -> [3,6), 4 -> [6,10).
    values = np.array([0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 9.999])
    np.testing.assert_array_equal(tree.find(values), [0, 0, 1, 1, 2, 2, 4, 4])
    tree.set(np.array([2, 2]), np.array([7.0, 0.5]))  # the last write wins
    assert tree.total == pytest.approx(7.5)
    np.testing.assert_array_equal(tree.get(np.arange(5)), [1.0, 2.0, 0.5, 0.0, 4.0])
    # Stratified draws with injected uniforms: strata of width total / 3 = 2.5.
    np.testing.assert_allclose(tree.stratified_values(3, np.array([0.0, 0.5, 0.99])), [0.0, 3.75, 7.475])
    np.testing.assert_array_equal(tree.find(tree.stratified_values(3, np.array([0.0, 0.5, 0.99]))), [0, 4, 4])


def test_sum_tree_refuses_bad_priorities():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="non-negative"):
        tree.set(np.array([0]), np.array([-1.0]))
    with pytest.raises(IndexError):
        tree.set(np.array([4]), np.array([1.0]))


def test_sum_tree_draws_in_proportion_to_priority():
    tree = SumTree(1000)
    priorities = np.random.default_rng(0).random(1000)
    tree.set(np.arange(1000), priorities)
    counts = np.bincount(tree.sample(200_000, np.random.default_rng(1)), minlength=1000)
    expected = 200_000 * priorities / priorities.sum()
    assert np.abs(counts - expected).max() < 6 * np.sqrt(expected.max())


def test_prioritised_memory_weights_updates_and_new_entries():
    memory = ReplayMemory(capacity=8, num_envs=1, observation_shape=(2,), gamma=GAMMA,
                          priority=PrioritySettings(alpha=0.5, epsilon=0.0))
    for value in range(4):
        _add(memory, [value])
    indices = np.array([0, 1, 2])
    memory.update_priorities(indices, np.array([-4.0, 1.0, 9.0]))  # priorities |delta|^0.5: 2, 1, 3
    # Entry 3 arrived at the largest priority seen before these updates (1.0); the new largest is 9.
    np.testing.assert_allclose(memory._tree.get(np.arange(4)), [2.0, 1.0, 3.0, 1.0])
    _add(memory, [4])
    assert memory._tree.get(np.array([4]))[0] == pytest.approx(3.0)  # 9 ** 0.5
    # IS weights: P = p / 10, N = 5 entries, w = (N P)^-beta / max w.
    weights = memory.importance_weights(np.array([0, 1, 2]), beta=1.0)
    np.testing.assert_allclose(weights, [0.5, 1.0, 1.0 / 3.0], rtol=1e-6)
    np.testing.assert_allclose(memory.importance_weights(np.array([0, 1]), beta=0.0), [1.0, 1.0])
    batch = memory.sample(4000, np.random.default_rng(0), beta=0.5)
    # Priorities 2, 1, 3, 1, 3 of a total 10; stratified draws stay close to the expected counts.
    counts = np.bincount(batch.indices, minlength=5)
    assert np.abs(counts - 4000 * np.array([2, 1, 3, 1, 3]) / 10).max() < 60
    np.testing.assert_array_equal(batch.action_tm1, batch.indices)  # the indices name the drawn entries


def test_bad_use_is_refused_with_a_reason():
    memory = ReplayMemory(capacity=4, num_envs=2, observation_shape=(2,))
    with pytest.raises(ValueError, match="empty"):
        memory.sample(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="too small for 4 envs"):
        ReplayMemory(capacity=4, num_envs=4, observation_shape=(2,), n_step=3)


def test_bytes_per_transition_counts_every_field():
    memory = ReplayMemory(capacity=10, num_envs=1, observation_shape=(4,))
    # two float32 observations, uint8 action, float32 reward and discount, the ended and transition flags
    assert memory.bytes_per_transition == 4 * 4 * 2 + 1 + 4 + 4 + 1 + 1


def test_a_resumed_memory_ends_open_episodes_as_truncations():
    """After a resume the envs start new episodes: no n-step window may run from the saved steps into them."""
    memory = ReplayMemory(capacity=40, num_envs=2, observation_shape=(2,), gamma=GAMMA, n_step=3)
    for step in range(4):  # env 0's episode is open at the checkpoint; env 1's ended on the last step
        _add(memory, [1 + step, 100 + step], ended=[False, step == 3])
    restored = ReplayMemory(capacity=40, num_envs=2, observation_shape=(2,), gamma=GAMMA, n_step=3)
    restored.load_state({name: array.copy() for name, array in memory.state().items()})
    restored.cut_episodes()
    for step in range(3):  # the new episodes after the resume
        _add(restored, [50 + step, 150 + step])
    env0 = _all(restored, 0, [2, 3])
    # From 2: steps 2 and 3, then the cut (a truncation: bootstrap from the stored s_t+1 of step 3).
    np.testing.assert_allclose(env0.reward_t, [30 + GAMMA * 40, 40])
    np.testing.assert_allclose(env0.discount_t, [GAMMA**2, GAMMA])
    np.testing.assert_array_equal(env0.observation_t[:, 0], [104, 104])
    assert restored.sampleable(np.array([0, 0]), np.array([2, 3])).all()
    np.testing.assert_array_equal(_all(restored, 1, [3]).reward_t, [1030])  # ended before: unchanged
    # Without the cut, env 0's window from step 2 would run on into the new episode's first step.
    memory_uncut = ReplayMemory(capacity=40, num_envs=2, observation_shape=(2,), gamma=GAMMA, n_step=3)
    memory_uncut.load_state({name: array.copy() for name, array in memory.state().items()})
    for step in range(3):
        _add(memory_uncut, [50 + step, 150 + step])
    assert _all(memory_uncut, 0, [2]).reward_t[0] == pytest.approx(30 + GAMMA * 40 + GAMMA**2 * 500)
