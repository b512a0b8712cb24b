"""Exact resume with replay shards and emulators, damaged checkpoints skipped, pre-emption by SIGTERM, a full disk."""
import json
import os
import re
import shutil
import signal
import subprocess
import numpy as np
import pytest

from hvd_dqn.logdir import checkpoint
from hvd_dqn.memories.frames import FrameReplayMemory
from hvd_dqn.memories.replay import PrioritySettings, ReplayMemory

from conftest import (PYTHON, REPO, _horovodrun, episodes_without_wall_time, horovodrun, python_module, run,
                      subprocess_env, wait_for_ranks, wall_seconds)

# The update counts below assume one update per env step of each rank, from 1,000 transitions per rank:
# pinned here (each rank's own envs and memory, no scaling rules), so they do not move with the preset or
# the defaults. No stop rule: every job runs to its budget.
CARTPOLE = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--eval_interval_env_steps=0", "--rank_scaling=batch",
            "--counts_per_rank", "--noscale_lr_by_workers", "--noscale_schedules_by_workers",
            "--num_envs=4", "--train_frequency=1", "--batch_size=64", "--stop_at_train_return=inf"]


def _train(logdir, *flags, timeout=600, check=True):
    return horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *CARTPOLE, f"--logdir={logdir}", *flags],
                      timeout=timeout, check=check)


@pytest.mark.parametrize("make", [
    lambda: ReplayMemory(60, 2, (3,), n_step=3, priority=PrioritySettings()),
    lambda: FrameReplayMemory(60, 2, (2, 2), n_step=2, priority=PrioritySettings()),
    lambda: FrameReplayMemory(60, 2, (2, 2)),
], ids=["vector-prioritized", "frames-prioritized", "frames-uniform"])
def test_replay_memories_save_and_load_exactly(tmp_path, make):
    memory, rng = make(), np.random.default_rng(0)
    for step in range(50):  # more steps than the ring holds, with episode ends
        observation = rng.integers(0, 255, size=(2, *memory.state()["_observations_tm1" if isinstance(
            memory, ReplayMemory) else "_frames"].shape[2:]))
        if isinstance(memory, FrameReplayMemory):
            observation = np.repeat(observation[:, None], 4, axis=1).astype(np.uint8)
        ended = rng.random(2) < 0.2
        memory.add(observation, rng.integers(0, 3, 2), rng.normal(size=2), (~ended).astype(np.float32),
                   observation, ended)
    if memory.priority:
        batch = memory.sample(8, rng)
        memory.update_priorities(batch.indices, rng.normal(size=8) * 5)
    memory.save(str(tmp_path / "shard.npz"))
    restored = make()
    restored.load(str(tmp_path / "shard.npz"))
    assert restored.digest() == memory.digest()
    one, other = memory.sample(16, np.random.default_rng(5)), restored.sample(16, np.random.default_rng(5))
    for field in ("observation_tm1", "action_tm1", "reward_t", "discount_t", "observation_t", "weights"):
        if getattr(one, field) is not None:
            np.testing.assert_array_equal(getattr(one, field), getattr(other, field))


def test_a_shard_from_another_memory_is_refused_by_name(tmp_path):
    ReplayMemory(60, 2, (3,)).save(str(tmp_path / "shard.npz"))
    with pytest.raises(ValueError, match="shape"):
        ReplayMemory(80, 2, (3,)).load(str(tmp_path / "shard.npz"))
    with pytest.raises(ValueError, match="--prioritized_replay"):
        ReplayMemory(60, 2, (3,), priority=PrioritySettings()).load(str(tmp_path / "shard.npz"))


def test_a_run_stopped_by_sigterm_and_resumed_is_the_run_that_never_stopped(tmp_path):
    """With --checkpoint_replay a checkpoint also holds each rank's emulators (gymnasium's Python envs) and
    the returns of the episodes under way, so a run stopped at any step and resumed plays the same episodes
    and ends with the same weights as the run that was never stopped: exact resume, end to end. A crash
    after a periodic checkpoint (one that is not also a log interval) resumes exactly too: the checkpoint was
    a log point, and the rows logged after it are set aside, not kept twice."""
    flags = [*CARTPOLE, "--checkpoint_replay", "--prioritized_replay", "--n_step=3", "--learning_starts=500",
             "--total_env_steps=3000", "--checkpoint_interval_env_steps=1500", "--log_interval_env_steps=1000"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    _train(whole, *flags[len(CARTPOLE):])
    output = tmp_path / "output.txt"
    with open(output, "w") as handle:
        job = subprocess.Popen([_horovodrun(), "-np", "2", "--gloo", PYTHON, "-m", "hvd_dqn.train", *flags,
                                f"--logdir={stopped}"], stdout=handle, stderr=subprocess.STDOUT, text=True,
                               env=subprocess_env(), cwd=REPO)
        pids = wait_for_ranks(output, 2, until=lambda text: "env steps 1,000/" in text)
        os.kill(pids[1], signal.SIGTERM)
        job.wait(timeout=120)
    assert job.returncode == 0, output.read_text()[-3000:]
    at_stop = checkpoint.read_counters(checkpoint.latest_checkpoint(str(stopped)))
    stopped_at, stop_wall_s = at_stop["env_steps"], at_stop["wall_s"]
    assert 1000 <= stopped_at < 3000
    log = _train(stopped, *flags[len(CARTPOLE):], "--resume")
    assert episodes_without_wall_time(stopped / "episodes.csv") == episodes_without_wall_time(whole / "episodes.csv")
    # Time to a score can be read from episodes.csv: its clock went on from the stop, not from zero (ranks'
    # clocks differ by milliseconds, so rows of one env step may differ that much out of order).
    seconds = wall_seconds(stopped / "episodes.csv")
    assert stop_wall_s > 0 and all(later >= earlier - 0.5 for earlier, later in zip(seconds, seconds[1:]))
    steps = [int(line.split(",")[0]) for line in (stopped / "episodes.csv").read_text().splitlines()[1:]]
    assert all(wall_s >= stop_wall_s - 0.5 for step, wall_s in zip(steps, seconds) if step > stopped_at)
    assert checkpoint.read_counters(checkpoint.latest_checkpoint(str(stopped)))["wall_s"] > stop_wall_s
    assert not list(stopped.glob("*.after_*.csv"))  # a stop by signal checkpoints its last step: nothing set aside
    assert "emulator states saved with 2 of 2 ranks' memories: their episodes under way go on" in (
        log.stdout + log.stderr)
    restored = re.search(r"replay memories restored \(transitions per rank \[\d+, \d+\]; digests \['(\w+)', '(\w+)'\]\)",
                         log.stdout + log.stderr)
    assert restored, (log.stdout + log.stderr)[-3000:]
    assert list(restored.groups()) == [state["replay_digest"] for state in at_stop["rank_states"]]  # bit for bit
    assert "restored replay digests" not in log.stdout + log.stderr  # the trainer's own comparison found none
    # batch at 2 ranks with the schedules left in updates: legitimate, with the study's warning.
    assert ("--rank_scaling=batch with 2 ranks makes 2 times fewer updates per env step, so "
            "--target_update_period and the step-size warm-up and decay (counted in updates) span 2 times the env "
            "steps they span at one rank; --scale_schedules_by_workers keeps them on one rank's clock") in (
        log.stdout + log.stderr)
    final, final_whole = (checkpoint.read_counters(checkpoint.latest_checkpoint(str(run))) for run in (stopped, whole))
    assert final["replica_weight_digests"] == final_whole["replica_weight_digests"]
    assert [state["replay_digest"] for state in final["rank_states"]] == [
        state["replay_digest"] for state in final_whole["rank_states"]]

    # Crashes after the periodic checkpoint at 1,504 env steps, while writing the one at 3,000 (its data cut
    # short): the resume names the damaged one, skips it, plays the rest again from 1,504, and episodes.csv ends
    # as the unstopped run's. Killed long after it, the CSVs logged on to the end: the rows after 1,504 are set
    # aside, not kept twice.
    late = tmp_path / "late"
    shutil.copytree(stopped, late)
    damaged = checkpoint.latest_checkpoint(str(late))
    data = [name for name in os.listdir(damaged) if name.startswith("state.data")][0]
    os.truncate(os.path.join(damaged, data), 1000)
    log = _train(late, *flags[len(CARTPOLE):], "--resume")
    assert re.search(f"skipping checkpoint {re.escape(str(damaged))}: .*does not load", log.stdout + log.stderr)
    assert "resumed from " + str(late / "checkpoints" / "ckpt-000000001504") in log.stdout + log.stderr
    assert episodes_without_wall_time(late / "episodes.csv") == episodes_without_wall_time(whole / "episodes.csv")
    aside = (late / "episodes.after_1504.csv").read_text().splitlines()
    assert aside[0] == "env_steps,env_frames,rank,env,return,length,wall_s" and len(aside) > 1
    assert all(int(row.split(",")[0]) > 1504 for row in aside[1:])
    assert "moved to " + str(late / "episodes.after_1504.csv") in log.stdout + log.stderr
    # Killed right after it, before the next log interval (2,000), the CSVs would hold what the log points up
    # to 1,504 wrote. The checkpoint was one of them, so no episode before it is missing: the resume then plays
    # on from 1,504 as the one above did, with nothing to set aside.
    logged = [int(row.split(",")[0]) for row in (late / "metrics.csv").read_text().splitlines()[1:]]
    assert max(env_steps for env_steps in logged if env_steps <= 1504) == 1504


# With the pipeline, acting may be a few steps ahead when the stop is agreed: every rank takes and pays for
# those steps, then stops at the same iteration (the replicas' digests below prove it).
@pytest.mark.parametrize("acting", [[], ["--pipeline=on"]], ids=["in_order", "pipeline"])
def test_sigterm_to_one_rank_stops_every_rank_with_a_checkpoint(tmp_path, acting):
    logdir = tmp_path / "run"
    command = [_horovodrun(), "-np", "2", "--gloo", PYTHON, "-m", "hvd_dqn.train", *CARTPOLE, f"--logdir={logdir}",
               "--total_env_steps=1000000", "--checkpoint_interval_env_steps=0", "--log_interval_env_steps=1000",
               *acting]
    output = tmp_path / "output.txt"
    with open(output, "w") as handle:
        job = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True, env=subprocess_env(),
                               cwd=REPO)
        pids = wait_for_ranks(output, 2, until=lambda text: (logdir / "metrics.csv").exists())
        os.kill(pids[1], signal.SIGTERM)  # as a scheduler pre-empting one host would
        try:
            job.wait(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            pytest.fail("the job did not stop after SIGTERM:\n" + output.read_text()[-3000:])
    text = output.read_text()
    assert job.returncode == 0, text[-3000:]
    # Rank 0 logs the stop, naming the rank that received the signal.
    assert "received SIGTERM (at rank 1): finishing the steps under way" in text, text[-3000:]
    assert re.search(r"stopped by SIGTERM \(at rank 1\) at [\d,]+ env steps; checkpoint .* To continue, run the "
                     r"same command with --resume", text), text[-3000:]
    assert "Traceback" not in text
    stopped = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert 0 < stopped["env_steps"] < 1_000_000
    digests = stopped["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    report = tmp_path / "eval.json"  # the checkpoint loads
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["env_steps"] == stopped["env_steps"]


def test_a_full_disk_stops_the_job_with_one_line_and_keeps_earlier_checkpoints(tmp_path):
    logdir = tmp_path / "run"
    # A 48 KB file-size limit: the first replay shards (about 34 KB) fit, the next ones (about 56 KB) do not,
    # so the write fails part-way as on a full disk (Python turns SIGXFSZ into an OSError: File too large).
    command = ["bash", "-c", 'ulimit -f 48; exec "$@"', "bash", _horovodrun(), "-np", "2", "--gloo", PYTHON, "-m",
               "hvd_dqn.train", *CARTPOLE, f"--logdir={logdir}", "--hidden_sizes=16", "--total_env_steps=3000",
               "--checkpoint_interval_env_steps=1500", "--checkpoint_replay"]
    result = run(command, timeout=600, check=False)
    text = result.stdout + result.stderr
    assert result.returncode != 0
    errors = [line for line in text.splitlines() if "hvd_dqn.train: error:" in line]
    assert len(errors) == 1, text[-3000:]
    assert re.search(r"checkpoint at 3,000 env steps in .*/checkpoints failed: rank \d could not write its replay "
                     r"shard \(File too large\); the earlier checkpoints are intact", errors[0]), errors[0]
    names = sorted(os.listdir(logdir / "checkpoints"))
    assert names == ["ckpt-000000001504"]  # no staging folder or half-written checkpoint left behind
    assert os.path.exists(logdir / "checkpoints" / "ckpt-000000001504" / checkpoint.COMPLETE_MARKER)
