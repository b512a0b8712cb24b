"""The frame-deduplicated replay memory rebuilds exactly the stacks the environment produced."""
import numpy as np
import pytest

from hvd_dqn.memories.frames import FrameReplayMemory
from hvd_dqn.memories.replay import PrioritySettings

STACK, SHAPE = 4, (2, 2)


class StackingEnvs:
    """Envs whose frames are filled with a distinct number (env * 1000 + step + 1), stacked the way
    AtariVectorEnv does: a new episode's stack is three zero frames and its first frame."""

    def __init__(self, num_envs):
        self.num_envs = num_envs
        self.step_count = 0
        self.stacks = np.zeros((num_envs, STACK) + SHAPE, np.uint8)
        for env in range(num_envs):
            self.stacks[env, -1] = self._frame(env)

    def _frame(self, env):
        return np.full(SHAPE, (env * 50 + self.step_count + 1) % 256, np.uint8)

    def step(self, ends):
        """Advances every env; `ends[e]` ends env e's episode at this step. Returns (s_t+1 true, s_t+1 new)."""
        self.step_count += 1
        true_next = np.concatenate([self.stacks[:, 1:], np.stack([self._frame(e) for e in range(self.num_envs)])[:, None]], 1)
        after = true_next.copy()
        for env in np.flatnonzero(ends):
            after[env] = 0
            after[env, -1] = np.full(SHAPE, 200 + env, np.uint8)  # a fresh episode's first frame
        self.stacks = after
        return true_next, after


def _run(memory, envs, schedule):
    """Plays `schedule` (a list of per-step episode-end lists); returns {(env, entry): (s_t, a, r, d, s_t+1)}."""
    expected, entry = {}, memory._written.copy()  # the entries each env has written so far
    for step, ends in enumerate(schedule):
        ends = np.asarray(ends, bool)
        observation = envs.stacks.copy()
        true_next, after = envs.step(ends)
        action = np.full(envs.num_envs, step % 6)
        reward = np.arange(envs.num_envs, dtype=np.float32) + step
        discount = np.where(ends & (np.arange(envs.num_envs) % 2 == 0), 0.0, 1.0)  # even envs terminate
        memory.add(observation, action, reward, discount, true_next, ends)
        for env in range(envs.num_envs):
            expected[(env, int(entry[env]))] = (observation[env], step % 6, reward[env], discount[env], true_next[env])
        entry += 1 + ends
    return expected


def _check_all(memory, expected):
    keys = [key for key in expected if memory.sampleable(np.array([key[0]]), np.array([key[1]]))[0]]
    assert keys, "nothing sampleable"
    envs, positions = np.array([k[0] for k in keys]), np.array([k[1] for k in keys])
    batch = memory.gather(envs, positions)
    for index, key in enumerate(keys):
        observation, action, reward, discount, next_observation = expected[key]
        np.testing.assert_array_equal(batch.observation_tm1[index], observation, err_msg=str(key))
        np.testing.assert_array_equal(batch.observation_t[index], next_observation, err_msg=str(key))
        assert (batch.action_tm1[index], batch.reward_t[index]) == (action, reward)
        assert batch.discount_t[index] == pytest.approx(memory.gamma * discount)  # one step: gamma or 0
    return keys


def _values(stack):
    return [int(frame[0, 0]) for frame in stack]


def test_first_steps_of_an_episode_are_zero_padded():
    memory = FrameReplayMemory(capacity=40, num_envs=1, frame_shape=SHAPE)
    envs = StackingEnvs(1)
    _run(memory, envs, [[False]] * 3)
    batch = memory.gather(np.array([0, 0]), np.array([0, 1]))
    assert [_values(stack) for stack in batch.observation_tm1] == [[0, 0, 0, 1], [0, 0, 1, 2]]
    assert [_values(stack) for stack in batch.observation_t] == [[0, 0, 1, 2], [0, 1, 2, 3]]
    # The newest transition waits for its successor.
    assert memory.sampleable(np.array([0, 0, 0]), np.array([0, 1, 2])).tolist() == [True, True, False]


def test_an_episode_ending_inside_a_stack_leaks_no_frames():
    memory = FrameReplayMemory(capacity=40, num_envs=1, frame_shape=SHAPE)
    envs = StackingEnvs(1)
    expected = _run(memory, envs, [[False], [True], [False], [False], [False]])
    # Entries: 0,1 episode one; 2 its final observation; 3,4,5 episode two (5 awaits its successor).
    assert memory.sampleable(np.array([0] * 6), np.arange(6)).tolist() == [True, True, False, True, True, False]
    batch = memory.gather(np.array([0, 0, 0]), np.array([1, 3, 4]))
    assert _values(batch.observation_t[0]) == [0, 1, 2, 3]  # the true last observation, to bootstrap from
    assert _values(batch.observation_tm1[1]) == [0, 0, 0, 200]  # nothing of episode one
    assert _values(batch.observation_tm1[2]) == [0, 0, 200, 4]
    _check_all(memory, expected)


def test_wrap_around_keeps_stacks_exact_and_refuses_overwritten_history():
    memory = FrameReplayMemory(capacity=8, num_envs=1, frame_shape=SHAPE)
    envs = StackingEnvs(1)
    expected = _run(memory, envs, [[False]] * 13)  # 13 entries through a ring of 8
    held = list(range(5, 13))
    ok = memory.sampleable(np.zeros(8, np.int64), np.array(held)).tolist()
    # 5..7 lack older frames (overwritten); 12 lacks its successor.
    assert ok == [False, False, False, True, True, True, True, False]
    batch = memory.gather(np.array([0]), np.array([8]))
    assert _values(batch.observation_tm1[0]) == [6, 7, 8, 9]
    keys = _check_all(memory, expected)
    assert sorted(position for _, position in keys) == [8, 9, 10, 11]


def test_two_interleaved_envs_with_different_episode_boundaries():
    memory = FrameReplayMemory(capacity=60, num_envs=2, frame_shape=SHAPE)
    envs = StackingEnvs(2)
    schedule = [[False, False], [False, True], [True, False], [False, False], [False, True], [False, False]]
    expected = _run(memory, envs, schedule)
    keys = _check_all(memory, expected)
    assert {env for env, _ in keys} == {0, 1}
    # A terminated episode (even env) has discount 0; a truncated one (odd env) bootstraps.
    assert expected[(0, 2)][3] == 0.0 and expected[(1, 1)][3] == 1.0


def test_sampling_draws_only_sampleable_transitions_over_many_wraps():
    memory = FrameReplayMemory(capacity=30, num_envs=3, frame_shape=SHAPE)
    envs = StackingEnvs(3)
    rng = np.random.default_rng(0)
    expected = _run(memory, envs, [list(rng.random(3) < 0.15) for _ in range(60)])
    batch = memory.sample(500, np.random.default_rng(1))
    stored = {(tuple(_values(obs)), tuple(_values(nxt))) for obs, _, _, _, nxt in expected.values()}
    for obs, nxt in zip(batch.observation_tm1, batch.observation_t):
        assert (tuple(_values(obs)), tuple(_values(nxt))) in stored


def test_memory_per_transition_fits_the_atari_budget():
    memory = FrameReplayMemory(capacity=1000, num_envs=4)
    assert memory.bytes_per_transition <= 7200
    # frame, action, reward, discount, ended, transition, first
    assert memory.bytes_per_transition == 84 * 84 + 1 + 4 + 4 + 1 + 1 + 1


def test_empty_memory_refuses_to_sample():
    with pytest.raises(ValueError, match="empty"):
        FrameReplayMemory(capacity=40, num_envs=2, frame_shape=SHAPE).sample(4, np.random.default_rng(0))


def test_three_step_stacks_and_returns_follow_each_env_to_its_episode_end():
    """Two envs interleaved, episodes ending (terminated in env 0, truncated in env 1) inside windows."""
    gamma = 0.5
    memory = FrameReplayMemory(capacity=80, num_envs=2, frame_shape=SHAPE, gamma=gamma, n_step=3)
    envs = StackingEnvs(2)
    schedule = [[False, False], [False, True], [True, False], [False, False], [False, False], [False, False]]
    steps = {0: [], 1: []}  # per env, per step: (entry, observation, reward, discount, ended, true next)
    entry, checked = np.zeros(2, np.int64), 0
    for step, ends in enumerate(schedule):
        ends = np.asarray(ends, bool)
        observation = envs.stacks.copy()
        true_next, _ = envs.step(ends)
        reward = np.array([1.0, 100.0]) * 2.0**step
        discount = np.where(ends & (np.arange(2) == 0), 0.0, 1.0)  # env 0 terminates, env 1 truncates
        memory.add(observation, np.zeros(2, np.int64), reward, discount, true_next, ends)
        for env in range(2):
            steps[env].append((int(entry[env]), observation[env], reward[env], discount[env], ends[env], true_next[env]))
        entry += 1 + ends
    for env in range(2):
        for index, (position, observation, *_rest) in enumerate(steps[env]):
            # The expected 3-step transition, walked step by step.
            total, taken, discount, next_stack = 0.0, 0, 0.0, None
            for _, _, reward, step_discount, ended, true_next in steps[env][index:index + 3]:
                total += gamma**taken * reward
                taken += 1
                discount, next_stack = gamma**taken * step_discount, true_next
                if ended or step_discount == 0:
                    break
            ok = memory.sampleable(np.array([env]), np.array([position]))[0]
            if index + 3 > len(steps[env]) and not (ended or step_discount == 0):
                assert not ok  # the window is not written yet
                continue
            if index + taken >= len(steps[env]):
                continue  # the last step's successor frame is not written yet
            assert ok, (env, position)
            batch = memory.gather(np.array([env]), np.array([position]))
            np.testing.assert_array_equal(batch.observation_tm1[0], observation)
            np.testing.assert_array_equal(batch.observation_t[0], next_stack, err_msg=f"{env}, {position}")
            assert batch.reward_t[0] == pytest.approx(total) and batch.discount_t[0] == pytest.approx(discount)
            checked += 1
    assert checked == 6  # steps 0-2 of each env; the later ones await frames not yet written


def test_prioritised_frame_memory_never_draws_final_observation_entries():
    memory = FrameReplayMemory(capacity=60, num_envs=2, frame_shape=SHAPE, n_step=2,
                               priority=PrioritySettings(alpha=0.6))
    envs = StackingEnvs(2)
    rng = np.random.default_rng(0)
    _run(memory, envs, [list(rng.random(2) < 0.2) for _ in range(40)])
    batch = memory.sample(2000, np.random.default_rng(1), beta=0.4)
    envs_drawn, slots = batch.indices // memory.segment, batch.indices % memory.segment
    assert memory._transition[envs_drawn, slots].all()
    assert batch.weights.dtype == np.float32 and batch.weights.max() == 1.0 and (batch.weights > 0).all()


def _resumed(memory, cut):
    """A copy of `memory` as a resumed run restores it from its shard, its episodes cut or not."""
    restored = FrameReplayMemory(memory.capacity, memory.num_envs, SHAPE, gamma=memory.gamma, n_step=memory.n_step)
    restored.load_state({name: array.copy() for name, array in memory.state().items()})
    if cut:
        restored.cut_episodes()
    return restored


class ResetEnvs(StackingEnvs):
    """The same envs after a resume: new episodes whose frames (100 + env * 50 + step) differ from before."""

    def __init__(self, num_envs, step_count):
        super().__init__(num_envs)
        self.step_count = step_count
        self.stacks[:] = 0
        for env in range(num_envs):
            self.stacks[env, -1] = self._frame(env)


@pytest.mark.parametrize("n_step", [1, 3])
def test_a_resumed_memory_ends_the_saved_episodes_instead_of_joining_them_to_new_ones(n_step):
    memory = FrameReplayMemory(capacity=80, num_envs=2, frame_shape=SHAPE, n_step=n_step)
    envs = StackingEnvs(2)
    # Env 1's episode ends on the last step before the checkpoint; env 0's is still running.
    before = _run(memory, envs, [[False, False]] * 5 + [[False, True]])
    for cut in (False, True):
        restored = _resumed(memory, cut)
        after = _run(restored, ResetEnvs(2, step_count=100), [[False, False]] * 6)
        written = restored._written
        mixed = []
        for env in range(2):
            for position in range(int(written[env])):
                if not restored.sampleable(np.array([env]), np.array([position]))[0]:
                    continue
                batch = restored.gather(np.array([env]), np.array([position]))
                stacks = _values(batch.observation_tm1[0]) + _values(batch.observation_t[0])
                old = [value for value in stacks if 0 < value < 100]
                new = [value for value in stacks if value >= 100 and value < 200]
                if old and new:
                    mixed.append((env, position, stacks))
        if not cut:  # what the resume did before: env 0's last saved step is joined to the new episode
            assert mixed, "the uncut memory should show the bug this test guards against"
            continue
        assert mixed == []
        # Env 0 (open episode): its last saved step is lost, the one before bootstraps from the last frame
        # saved, as a truncation (discount gamma^k, not 0).
        last = 5
        assert not restored.sampleable(np.array([0]), np.array([last]))[0]
        assert restored.sampleable(np.array([0]), np.array([last - 1]))[0]
        batch = restored.gather(np.array([0]), np.array([last - 1]))
        assert _values(batch.observation_t[0]) == [3, 4, 5, 6]
        assert batch.discount_t[0] == pytest.approx(memory.gamma)
        # Env 1 (its episode had ended) loses nothing.
        assert restored.sampleable(np.array([1]), np.array([5]))[0]
        if n_step == 1:  # every sampleable one-step transition, before the resume and after, is exact
            expected = {**{key: value for key, value in before.items() if not (key[0] == 0 and key[1] == last)},
                        **after}
            keys = _check_all(restored, expected)
            assert len([key for key in keys if key in after]) == 2 * 5  # all but each env's newest
