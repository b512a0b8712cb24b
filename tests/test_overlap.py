"""Acting overlapped with learning (--overlap_acting) changes when the emulators run, nothing else."""
import pytest

from hvd_dqn.envs import make_vector_env, steps_in_background
from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, python_module


def _train(logdir, *flags):
    # Epsilon 1 throughout: actions never depend on the weights, so the one thing overlap may change (actions
    # from weights one step older) cannot show, and both runs must be the same bit for bit.
    python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / 'atari_smoke.flags'}", f"--logdir={logdir}",
                                    "--noapex_exploration", "--epsilon_start=1", "--epsilon_end=1",
                                    "--checkpoint_replay", "--deterministic_ops", "--total_env_steps=2400",
                                    "--checkpoint_interval_env_steps=1200", *flags], timeout=600)
    return [checkpoint.read_counters(path) for path in checkpoint.complete_checkpoints(str(logdir))]


def test_overlap_makes_the_same_updates_from_the_same_memory_as_the_in_order_loop(tmp_path):
    overlapped = _train(tmp_path / "overlap", "--overlap_acting")
    in_order = _train(tmp_path / "in_order", "--nooverlap_acting")
    assert [saved["env_steps"] for saved in overlapped] == [1200, 2400]
    # 400 transitions per rank before learning, then 4 envs / train_frequency 4 = 1 update per step of 4 envs.
    assert [saved["updates"] for saved in overlapped] == [(1200 - 400) // 4 + 1, (2400 - 400) // 4 + 1]
    for one, other in zip(overlapped, in_order):
        assert one["updates"] == other["updates"]
        assert one["rank_states"][0]["replay_digest"] == other["rank_states"][0]["replay_digest"]  # no transition
        # lost or stored out of order; with prioritised replay the priorities are part of the digest
        assert one["rank_states"][0]["update_credit"] == other["rank_states"][0]["update_credit"]
        assert one["replica_weight_digests"] == other["replica_weight_digests"]  # the same minibatches, in order


def test_only_emulators_that_step_on_their_own_threads_overlap():
    atari, cartpole = make_vector_env("pong", 2), make_vector_env("CartPole-v1", 2)
    try:
        assert steps_in_background(atari) and not steps_in_background(cartpole)
        observation, _ = atari.reset(seed=[1, 2])
        atari.send([0, 0])  # the step runs while the caller is free
        next_observation, reward, terminated, truncated, info = atari.recv()
        assert next_observation.shape == observation.shape and "life_lost" in info
    finally:
        atari.close()
        cartpole.close()
