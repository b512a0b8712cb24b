"""Horovod Elastic (--elastic): the training state's rollback, a worker killed mid-run, a worker joining."""
import json
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, _horovodrun, horovodrun, python_module, subprocess_env

# CartPole, 4 envs per rank, learning from 1,000 transitions per rank, one update per env step per rank, and the
# linear learning-rate rule following the world: pinned here, so the update counts below do not move with the
# preset's tuning. No stop rule: every job runs to its budget.
CARTPOLE = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--eval_interval_env_steps=0", "--elastic",
            "--elastic_commit_env_steps=1000", "--log_interval_env_steps=1000", "--checkpoint_interval_env_steps=4000",
            "--rank_scaling=batch", "--num_envs=4", "--train_frequency=1", "--batch_size=64", "--scale_lr_by_workers",
            "--lr_warmup_updates=1000", "--stop_at_train_return=inf"]


def test_rollback_restores_networks_optimizer_and_counters_exactly():
    import horovod.tensorflow as hvd

    from hvd_dqn.agent.dqn.agent import DQNAgent
    from hvd_dqn.agent.dqn.learner import DQNLearner
    from hvd_dqn.agent.configs import make_config
    from hvd_dqn.agent.networks import build_mlp_q_network
    from hvd_dqn.memories.replay import Batch
    from hvd_dqn.run.elastic import TrainingState
    from hvd_dqn.run.progress import Counters

    hvd.init()

    config = make_config(learning_rate=1e-2, max_grad_norm=0.0, double_dqn=True)
    learner = DQNLearner.from_config(config, build_mlp_q_network((3,), 2, (8,), "online"),
                                     build_mlp_q_network((3,), 2, (8,), "target"), 1)

    class Trainer:  # the parts of hvd_dqn.run.trainer.Trainer the state touches
        agent = DQNAgent(config, learner, memory=None, spec=None, num_envs=1, world_size=1,
                         sample_rng=np.random.default_rng(1), rank_metrics=None)
        counters = Counters(env_steps=4000, episodes=7, updates=1500)
        last_checkpoint_env_steps = 4000

    trainer = Trainer()
    trainer.agent.env_steps_since_update = 2
    state = TrainingState(trainer)  # commits on creation
    committed = [variable.numpy().copy() for variable in trainer.agent.synchronized_variables]
    rng = np.random.default_rng(0)
    learner.update(Batch(rng.normal(size=(4, 3)).astype(np.float32), np.array([0, 1, 1, 0], np.int32),
                                 np.ones(4, np.float32), np.full(4, 0.9, np.float32),
                                 rng.normal(size=(4, 3)).astype(np.float32)))
    trainer.counters = Counters(env_steps=4800, episodes=9, updates=1900)
    trainer.agent.env_steps_since_update = 3
    assert any(not np.array_equal(old, new.numpy())
               for old, new in zip(committed, trainer.agent.synchronized_variables))

    state.restore()  # what Horovod does on the survivors after a lost worker
    for old, new in zip(committed, trainer.agent.synchronized_variables):
        np.testing.assert_array_equal(old, new.numpy())  # networks, Adam's moments and step, update count
    assert trainer.counters == Counters(env_steps=4000, episodes=7, updates=1500)
    assert trainer.agent.env_steps_since_update == 2 and trainer.last_checkpoint_env_steps == 4000

    state.started = True
    state.sync()  # a (one-rank) ring re-formed: rank 0's state is everyone's, and is the new commit
    trainer.counters.updates = 1
    state.restore()
    assert trainer.counters.updates == 1500 and state.started


# PQN's CartPole preset, each rank with its own 4 envs (as --elastic has it), committing every 2,048 env steps.
# QR-DQN's CartPole preset under the same elastic settings as DQN's, with fewer quantiles and a smaller network.
CARTPOLE_QRDQN = [f"--flagfile={REPO / 'configs' / 'cartpole_qrdqn.flags'}", *CARTPOLE[1:], "--num_quantiles=8",
                  "--hidden_sizes=64,64"]
# C51 as full Rainbow: noisy networks (their noise keyed by the update count the rollback restores), dueling, double.
CARTPOLE_RAINBOW = [f"--flagfile={REPO / 'configs' / 'cartpole_c51.flags'}", *CARTPOLE[1:], "--num_atoms=11",
                    "--noisy_nets", "--dueling", "--hidden_sizes=64,64"]
CARTPOLE_PQN = [f"--flagfile={REPO / 'configs' / 'cartpole_pqn.flags'}", "--elastic", "--elastic_commit_env_steps=2048",
                "--log_interval_env_steps=2048", "--checkpoint_interval_env_steps=16384", "--stop_at_train_return=inf"]


def _elastic_job(tmp_path, hosts, *flags, np_=2, preset=CARTPOLE):
    """Starts `horovodrun --min-np 1 --max-np 2` with scripts/discover_hosts.sh reading `hosts` (a file the test
    may change while the job runs); returns (process, output file, logdir)."""
    hosts_file, logdir, output = tmp_path / "hosts.txt", tmp_path / "run", tmp_path / "output.txt"
    hosts_file.write_text(hosts)
    # --network-interface lo: Horovod Elastic otherwise needs two hosts up before it starts, to compare NICs.
    command = [_horovodrun(), "-np", str(np_), "--min-np", "1", "--max-np", "2", "--network-interface", "lo",
               "--host-discovery-script", str(REPO / "scripts" / "discover_hosts.sh"),
               PYTHON, "-m", "hvd_dqn.train", *preset, f"--logdir={logdir}", *flags]
    env = dict(subprocess_env(), HVD_DQN_HOSTS_FILE=str(hosts_file))
    handle = open(output, "w")
    job = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
    return job, output, logdir


def _wait_for(output, pattern, job, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, output.read_text())
        if match:
            return match
        if job.poll() is not None:
            break
        time.sleep(0.5)
    job.kill()
    pytest.fail(f"never saw {pattern!r}:\n{output.read_text()[-4000:]}")


def _finish(job, output, timeout=300):
    try:
        job.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.kill()
        pytest.fail("the elastic job did not finish:\n" + output.read_text()[-4000:])
    text = output.read_text()
    assert job.returncode == 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    return text


def _kill_mid_run(tmp_path, killed_rank, under_way, *flags, preset=CARTPOLE):
    """Starts a 2-rank elastic job, SIGKILLs rank `killed_rank` once the log shows `under_way`, lets the survivor
    finish; returns (its output, the logdir, the env steps and updates of the commit it went on from)."""
    job, output, logdir = _elastic_job(tmp_path, "localhost:1\n127.0.0.1:1\n", *flags, preset=preset)
    world = _wait_for(output, r"world: 2 ranks.*\n.*rank \d \(local rank 0, pid (\d+)\)\n.*rank \d \(local rank 0, "
                              r"pid (\d+)\)", job)
    pids = {int(rank): int(pid) for rank, pid in re.findall(r"rank (\d) \(local rank 0, pid (\d+)\)", world.group(0))}
    _wait_for(output, under_way, job)
    os.kill(pids[killed_rank], signal.SIGKILL)
    text = _finish(job, output)
    changed = re.search(r"world changed from 2 to 1 ranks(; learning rate rescaled)?; going on from the last commit "
                        r"\(([\d,]+) env steps, ([\d,]+) updates\)", text)
    assert changed, text[-4000:]
    # only the DQN family's --scale_lr_by_workers follows the world
    assert bool(changed.group(1)) == (preset is not CARTPOLE_PQN)
    commit_env_steps, commit_updates = (int(group.replace(",", "")) for group in changed.groups()[1:])
    return text, logdir, commit_env_steps, commit_updates


def _final_checkpoint_plays(tmp_path, logdir, env_steps) -> None:
    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["env_steps"] == env_steps


# Rank 1 killed with the pipeline on covers what rank 1 killed in order would (the survivor's roll-back is the
# same); rank 0 killed in order covers the writer's loss.
@pytest.mark.parametrize("killed_rank, acting", [(0, []), (1, ["--pipeline=on"])], ids=["rank0", "rank1-pipeline"])
def test_training_survives_a_worker_killed_mid_run(tmp_path, killed_rank, acting):
    """SIGKILL of a worker in the middle of training, rank 0 (the writer) included: the survivor rolls back to the
    last commit, goes on alone to the end (as rank 0, writing the checkpoints) and exits 0. With the pipeline, the
    survivor's acting thread is stopped by the failure and started again after the rollback."""
    total = 10_000
    # Learning is under way at 6,000 env steps (updates from 2,000 on).
    _, logdir, commit_env_steps, commit_updates = _kill_mid_run(tmp_path, killed_rank, r"env steps 6,000/",
                                                                f"--total_env_steps={total}", *acting)
    _survivor_finished_on_dqns_schedule(tmp_path, logdir, commit_env_steps, commit_updates, total)


def _survivor_finished_on_dqns_schedule(tmp_path, logdir, commit_env_steps, commit_updates, total):
    """Nothing lost or counted twice: two ranks made 4 updates per 8 env steps from 2,000 env steps on (the first
    4 when the memories reached 1,000 each) to the commit at or after 6,000; the survivor, its memory full, 4
    updates per 4 env steps after it to the budget, as one rank; and its final checkpoint plays."""
    assert 6_000 <= commit_env_steps < total
    assert commit_updates == 4 + (commit_env_steps - 2_000) // 2
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert final["env_steps"] == total and final["world_size"] == 1
    assert final["updates"] == commit_updates + (total - commit_env_steps)
    _final_checkpoint_plays(tmp_path, logdir, total)


# IQN under --mixed_precision is trained by tests/agent/test_distributional.py (2 ranks, exact resume); the
# rollback after a lost worker is the DQN family's, which these two cover.
@pytest.mark.parametrize("preset", [CARTPOLE_QRDQN, CARTPOLE_RAINBOW], ids=["qrdqn", "c51-full-rainbow"])
def test_a_distributional_agent_survives_a_worker_killed_under_mixed_precision(tmp_path, preset):
    """QR-DQN, and C51 with noisy networks, under --elastic with --mixed_precision (the distributional loss scaled,
    its gradients averaged by DistributedGradientTape): rank 1 killed mid-run; the survivor rolls back and trains
    alone to the budget with the update count of DQN's schedule (the same replay settings), and its final
    checkpoint plays."""
    total = 10_000
    _, logdir, commit_env_steps, commit_updates = _kill_mid_run(tmp_path, 1, r"env steps 6,000/",
                                                                f"--total_env_steps={total}", "--mixed_precision",
                                                                preset=preset)
    _survivor_finished_on_dqns_schedule(tmp_path, logdir, commit_env_steps, commit_updates, total)


def test_pqn_survives_a_worker_killed_mid_rollout(tmp_path):
    """PQN under --elastic with --mixed_precision (whose gradients cross Horovod's DistributedGradientTape, ungrouped
    under --elastic as DQN's are): rank 1 killed while the two rollouts fill; the survivor rolls back to the last
    commit, starts a new rollout and trains alone to the budget; the final checkpoint loads and plays."""
    total = 60_000
    # Ten rollouts of the job by 10,240 env steps: learning is under way.
    _, logdir, commit_env_steps, commit_updates = _kill_mid_run(tmp_path, 1, r"env steps 10,240/",
                                                                f"--total_env_steps={total}", "--mixed_precision",
                                                                preset=CARTPOLE_PQN)
    assert 10_240 <= commit_env_steps < total
    # Each rollout of the job (2 ranks x 4 envs x 128 steps) pays for 16 updates; rollouts are whole at commits.
    assert commit_updates == 16 * (commit_env_steps // 1024)
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert final["env_steps"] >= total and final["world_size"] == 1
    # The survivor's own rollouts (4 envs x 128 steps) each pay for 16 updates after the rollback.
    assert final["updates"] == commit_updates + 16 * ((final["env_steps"] - commit_env_steps) // 512)
    _final_checkpoint_plays(tmp_path, logdir, final["env_steps"])


def test_a_joining_worker_receives_the_weights_and_trains_in_step(tmp_path):
    job, output, logdir = _elastic_job(tmp_path, "localhost:1\n", "--total_env_steps=14000", np_=1)
    _wait_for(output, r"world: 1 ranks", job)
    _wait_for(output, r"env steps 3,000/", job)
    with open(tmp_path / "hosts.txt", "a") as hosts:
        hosts.write("127.0.0.1:1\n")  # a machine becomes available
    text = _finish(job, output)
    assert re.search(r"world changed from 1 to 2 ranks; learning rate rescaled; going on from the last commit", text)
    assert re.search(r"world: 2 ranks on 2 host\(s\)", text)
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert final["env_steps"] >= 14_000 and final["world_size"] == 2
    digests = final["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1], text[-3000:]  # the newcomer trained in lockstep
    assert "replicas differ" not in text


def test_elastic_over_mpi_is_refused_with_one_line(tmp_path):
    result = horovodrun(1, [PYTHON, "-m", "hvd_dqn.train", *CARTPOLE, f"--logdir={tmp_path}", "--total_env_steps=100"],
                        controller="mpi", check=False, timeout=300)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if "hvd_dqn.train: error:" in line]
    assert len(errors) == 1 and "--elastic: Horovod Elastic runs over Gloo" in errors[0], errors
