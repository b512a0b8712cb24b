"""What one rank of N runs: its envs, replay capacity, learning start and scaling rules (hvd_dqn.rank_split)."""

import pytest

from hvd_dqn.agent.configs import make_config, with_settings
from hvd_dqn.config import ConfigError
from hvd_dqn.rank_split import (check_world, job_num_envs_problem, rank_count_caution, rank_learning_starts, rank_share,
                                scales_lr, update_counted_schedules)

CARTPOLE = make_config(num_envs=8, replay_capacity=100_000, learning_starts=1000, batch_size=128)


@pytest.mark.parametrize("ranks, envs, capacity, starts", [
    (1, 8, 100_000, 1000), (2, 4, 50_000, 500), (4, 2, 25_000, 250),
    (8, 1, 12_500, 128),  # 1000 / 8 = 125 transitions would not hold a whole batch of 128 on each rank
])
def test_the_job_counts_are_split_over_the_ranks(ranks, envs, capacity, starts):
    assert rank_share(CARTPOLE, ranks) == (envs, capacity)
    assert rank_learning_starts(CARTPOLE, ranks) == starts


def test_updates_mode_waits_for_the_share_alone():
    """Under updates each rank draws batch_size / N, so its share of --learning_starts is enough."""
    assert rank_learning_starts(CARTPOLE.replace(rank_scaling="updates"), 8) == 125


@pytest.mark.parametrize("changes", [dict(counts_per_rank=True), dict(elastic=True)])
def test_per_rank_counts_are_each_ranks_own(changes):
    config = CARTPOLE.replace(**changes)
    assert rank_share(config, 4) == (8, 100_000) and rank_learning_starts(config, 4) == 1000


def test_a_split_that_does_not_fit_is_named():
    with pytest.raises(ConfigError, match=r"^--num_envs=8 \(the job's envs\) must split evenly over the 3 ranks"):
        rank_share(CARTPOLE, 3)
    small = CARTPOLE.replace(replay_capacity=1000)
    with pytest.raises(ConfigError, match=r"^--replay_capacity=1000: split over 8 ranks, each rank's 125 "
                                          r"transitions cannot hold the 128 it needs before learning starts"):
        rank_share(small, 8)
    updates = CARTPOLE.replace(rank_scaling="updates", batch_size=100)
    with pytest.raises(ConfigError, match=r"^--rank_scaling=updates: --batch_size=100 \(the global batch\) must "
                                          r"split evenly over the 8 ranks"):
        check_world(updates, 8)
    check_world(CARTPOLE, 8)  # batch: each rank's batch is whole, whatever N


def test_the_scaling_rules_apply_to_batch_only():
    """Both rules are on by default; under updates N ranks already make one rank's updates with one rank's
    batch, and under --elastic N changes while a schedule runs."""
    config = CARTPOLE.replace(target_update_period=250, lr_decay_updates=25_000, learning_rate_end=1e-4)
    assert scales_lr(config) and update_counted_schedules(config, 2).target_update_period == 125
    updates = config.replace(rank_scaling="updates")
    assert not scales_lr(updates) and update_counted_schedules(updates, 2).lr_decay_updates == 25_000
    elastic = config.replace(elastic=True)
    assert update_counted_schedules(elastic, 2).target_update_period == 250


def test_job_num_envs_is_only_for_per_rank_counts():
    assert "only with --counts_per_rank" in job_num_envs_problem(CARTPOLE, 8, [1, 2], [])
    per_rank = CARTPOLE.replace(counts_per_rank=True)
    assert job_num_envs_problem(per_rank, 8, [1, 2], []) is None
    assert "positive multiple of every worker count (1, 3)" in job_num_envs_problem(per_rank, 8, [1, 3], [])
    assert "leave --num_envs out" in job_num_envs_problem(per_rank, 8, [1, 2], ["--num_envs=2"])


@pytest.mark.parametrize("changes, workers, fill", [
    (dict(), 2, 1000), (dict(), 8, 8 * 128),  # the job's 1,000, or each of 8 ranks' whole batch of 128
    (dict(counts_per_rank=True), 2, 2000),  # each rank its own 1,000
])
def test_the_worker_benchmark_times_from_the_job_env_step_of_the_first_update(changes, workers, fill):
    from hvd_dqn.measure.benchmark_workers import fill_env_steps

    assert fill_env_steps(CARTPOLE.replace(**changes), workers) == fill


def test_a_lone_run_is_given_one_ranks_work():
    """--corun's lone runs (hvd_dqn.measure.corun): one worker with the share one rank of N has, its batch and
    update frequency under updates, and the target copies the rank makes."""
    from hvd_dqn.measure.corun import CorunError, core_blocks, rank_alone_flags

    config = CARTPOLE.replace(train_frequency=2, target_update_period=250)
    assert rank_alone_flags(config, 2) == ["--num_envs=4", "--replay_capacity=50000", "--learning_starts=500",
                                           "--target_update_period=125"]
    assert rank_alone_flags(config.replace(scale_schedules_by_workers=False), 2)[-1] == \
        "--target_update_period=250"
    updates = config.replace(rank_scaling="updates")
    assert rank_alone_flags(updates, 2)[3:] == ["--batch_size=64", "--train_frequency=1", "--target_update_period=250"]
    assert rank_alone_flags(config.replace(counts_per_rank=True), 2, job_num_envs=16)[0] == "--num_envs=8"
    with pytest.raises(CorunError, match=r"^--rank_scaling=updates with --train_frequency=2: a rank of 4 updates "
                                         r"every 2/4 of its env steps"):
        rank_alone_flags(updates, 4)
    assert core_blocks([5, 3, 4, 2], 2, 2) == [[2, 3], [4, 5]]


class _CountingLearner:
    """Stands in for DQNLearner: counts the updates it is asked for (each is a collective in a real job)."""

    def __init__(self):
        self.updates = 0

    def update(self, batch):
        self.updates += 1
        return {"td_loss": 0.0}

    def sync_target(self, tau):
        pass


class _NoMetrics:
    def record_update(self, metrics):
        pass


def _frame_memory_after(steps, episode_end_at=None):
    """A one-env frame memory given `steps` steps, one of which (if asked) ends an episode."""
    import numpy as np

    from hvd_dqn.memories.frames import FrameReplayMemory

    memory = FrameReplayMemory(1000, 1, (4, 4), stack=2)
    frames = np.zeros((1, 2, 4, 4), dtype=np.uint8)
    for step in range(steps):
        memory.add(frames, np.zeros(1), np.zeros(1), np.ones(1), frames, np.array([step == episode_end_at]))
    return memory


def test_no_rank_makes_its_first_update_before_every_ranks_memory_is_ready(monkeypatch):
    """The first update is a collective, so every rank must begin at the same iteration. A frame memory
    holds one more entry per ended episode, so after the same steps two ranks' memories differ in size:
    alone, the rank with more entries would start a step early and wait in its update while the other waits
    in the next collective. The ranks vote until all are ready (here the other rank is ready one step later)."""
    import numpy as np

    from hvd_dqn import collectives
    from hvd_dqn.agent.dqn.agent import DQNAgent

    assert len(_frame_memory_after(10, episode_end_at=3)) == len(_frame_memory_after(10)) + 1
    config = make_config().replace(learning_starts=11, train_frequency=1, batch_size=2,
                                 rank_scaling="batch", counts_per_rank=True)
    other_rank_ready = iter([False, False, True, True])
    votes = []

    def sum_over_ranks(values, name):
        votes.append(values[0])
        return np.asarray(values) + (0.0 if next(other_rank_ready) else 1.0)

    monkeypatch.setattr(collectives, "sum_over_ranks", sum_over_ranks)
    learner, memory = _CountingLearner(), _frame_memory_after(10, episode_end_at=3)
    side = DQNAgent(config, learner, memory, spec=None, num_envs=1, world_size=2,
                    sample_rng=np.random.default_rng(0), rank_metrics=_NoMetrics())
    side.join_world(2)
    try:
        side.learn(10, counters=_counters())  # this rank: 11 entries, ready; the other: not yet
        assert (learner.updates, side.env_steps_since_update) == (0, 0) and votes == [0.0]
        side.learn(11, counters=_counters())
        assert learner.updates == 0 and votes == [0.0, 0.0]
        counters = _counters()
        side.learn(12, counters=counters)  # every rank ready: the first update, on every rank at once
        assert learner.updates == counters.updates == 1 and votes == [0.0, 0.0, 0.0]
        side.learn(13, counters=counters)  # ready for good: no more votes
        assert learner.updates == 2 and len(votes) == 3
    finally:
        side.close()


def _counters():
    """The trainer's counters, as far as DQNAgent.learn uses them."""
    import types

    return types.SimpleNamespace(updates=0)


def test_the_start_up_log_warns_past_the_ranks_the_default_rule_was_measured_at():
    """Through 16 ranks the default rule kept one rank's env steps to a score; beyond, the log says it did not."""
    assert rank_count_caution(CARTPOLE, 1) is None and rank_count_caution(CARTPOLE, 16) is None
    caution = rank_count_caution(CARTPOLE, 32)
    assert caution.startswith("--rank_scaling=batch with 32 ranks multiplies the step size by 32: the rule kept one "
                              "rank's env steps to a score (within 1.25x) through 16 ranks")
    assert "at 32 ranks on this task" in caution and "CartPole needed 1.32x" in caution
    assert "every seed solved at 1.16x" in caution and "MinAtar" not in caution  # only the task being trained
    assert caution.endswith(f"a longer --n_step than {CARTPOLE.n_step}")
    minatar = rank_count_caution(CARTPOLE.replace(env_id="MinAtar/Breakout-v0"), 32)
    assert "MinAtar Breakout needed 1.05x" in minatar and "CartPole" not in minatar
    unmeasured = rank_count_caution(CARTPOLE.replace(env_id="ALE/Pong-v5"), 32)
    assert "32 ranks were not measured on ALE/Pong-v5; on the tasks that were" in unmeasured
    assert "CartPole needed 1.32x" in unmeasured and "MinAtar Breakout needed 1.05x" in unmeasured
    # Other rules were not measured there, so the figures would not be theirs.
    for changes in (dict(lr_scale_rule="sqrt"), dict(scale_lr_by_workers=False), dict(scale_schedules_by_workers=False),
                    dict(rank_scaling="updates"), dict(elastic=True), dict(agent="pqn")):
        assert rank_count_caution(with_settings(CARTPOLE, **changes), 32) is None, changes
