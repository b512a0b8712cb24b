"""--draw_ahead: the next minibatch is drawn on the sampler thread while the update before it runs, across env
steps too: each step's first minibatch is drawn before that step is stored. The draws happen in order from the
sampling stream, so runs repeat; a checkpoint keeps the stream's state from before the draw under way, so a
resumed run draws that minibatch again and goes on as the run that never stopped."""
import threading

import numpy as np
import pytest

from hvd_dqn.agent.configs import make_config, validate
from hvd_dqn.config import ConfigError
from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, episodes_without_wall_time, horovodrun

CARTPOLE = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--eval_interval_env_steps=0", "--num_envs=4",
            "--train_frequency=2", "--batch_size=32", "--stop_at_train_return=inf", "--noprioritized_replay",
            "--n_step=1", "--learning_starts=500", "--checkpoint_replay", "--log_interval_env_steps=500",
            "--checkpoint_interval_env_steps=100000", "--draw_ahead=on"]


def _agent(**changes):
    import horovod.tensorflow as hvd

    from hvd_dqn.agent.dqn.agent import DQNAgent
    from hvd_dqn.envs import probe_spec
    from hvd_dqn.run.metrics import RankMetrics

    config = make_config().replace(env_id="CartPole-v1", num_envs=2, batch_size=8, learning_starts=16,
                                 replay_capacity=1000, train_frequency=2, hidden_sizes=(16,), **changes)
    spec = probe_spec(config)
    hvd.init()
    return DQNAgent.build(config, spec, config.num_envs, config.replay_capacity, 1, np.random.default_rng(0),
                          RankMetrics()), spec


def _steps(agent, spec, count, rng):
    from hvd_dqn.agent.interface import Experience

    for _ in range(count):
        observation = rng.normal(size=(2, *spec.observation_shape)).astype(np.float32)
        step = (observation, np.ones(2, np.float32), np.zeros(2, bool), np.zeros(2, bool), {})
        yield Experience(observation=observation, action=np.zeros(2, np.int64), step_result=step)


class _Counters:
    updates = 0


def test_each_steps_first_minibatch_is_drawn_on_the_sampler_thread_before_the_step_is_stored():
    drawn = []
    for mode in ("on", "off"):
        agent, spec = _agent(draw_ahead=mode)
        sample = agent.memory.sample

        def recording_sample(*args, agent=agent, sample=sample, mode=mode, **kwargs):
            drawn.append((mode, threading.current_thread().name.startswith("minibatches"), len(agent.memory)))
            return sample(*args, **kwargs)

        agent.memory.sample = recording_sample
        counters, rng = _Counters(), np.random.default_rng(1)
        for experience in _steps(agent, spec, 12, rng):
            agent.store(experience)
            agent.learn(0, counters)
        agent.close()
        assert counters.updates == (12 * 2 - 16 + 2) // 2  # one update per 2 env steps once 16 are stored
    on = [(thread, size) for mode, thread, size in drawn if mode == "on"]
    off = [(thread, size) for mode, thread, size in drawn if mode == "off"]
    # In order, each step's single minibatch is drawn in line after the step is stored: 16, 18, ... transitions.
    assert [size for _, size in off] == list(range(16, 25, 2)) and not any(thread for thread, _ in off)
    # Drawn ahead: the first in line, every later one on the sampler thread, from the memory before the step that
    # uses it was stored (one step, 2 transitions, fewer); one more is under way at the end.
    assert on[0] == (False, 16) and all(thread for thread, _ in on[1:])
    assert [size for _, size in on] == [16, 16, 18, 20, 22, 24]


def test_prioritised_replay_cannot_draw_ahead():
    with pytest.raises(ConfigError, match="--draw_ahead=on: prioritised replay draws each minibatch with the "
                                          "priorities the update before it set"):
        validate(make_config().replace(env_id="CartPole-v1", prioritized_replay=True, draw_ahead="on"),
                 check_logdir_writable=False)
    agent, _ = _agent(prioritized_replay=True, draw_ahead="auto")
    assert not agent.draws_ahead  # and "auto" on a machine without a GPU is off
    agent.close()


def test_a_run_that_draws_ahead_resumes_as_the_run_that_never_stopped(tmp_path):
    """Two ranks: one run to 3,000 env steps; another stopped at 1,500 (its checkpoint written while a minibatch
    was being drawn ahead) and resumed to 3,000. Same episodes, same weights, same replay memories."""
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"

    def train(logdir, *flags):
        return horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *CARTPOLE, f"--logdir={logdir}", *flags], timeout=600)

    train(whole, "--total_env_steps=3000")
    train(stopped, "--total_env_steps=1500")
    at_stop = checkpoint.read_counters(checkpoint.latest_checkpoint(str(stopped)))
    assert at_stop["env_steps"] == 1500 and all("sample_rng_before_draw" in state for state in at_stop["rank_states"])
    log = train(stopped, "--total_env_steps=3000", "--resume")
    assert "resumed from" in log.stdout + log.stderr
    assert episodes_without_wall_time(stopped / "episodes.csv") == episodes_without_wall_time(whole / "episodes.csv")
    final, final_whole = (checkpoint.read_counters(checkpoint.latest_checkpoint(str(run))) for run in (stopped, whole))
    assert final["updates"] == final_whole["updates"] > 0
    assert final["replica_weight_digests"] == final_whole["replica_weight_digests"]
    assert [state["replay_digest"] for state in final["rank_states"]] == [
        state["replay_digest"] for state in final_whole["rank_states"]]
