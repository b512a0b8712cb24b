"""End-to-end runs of `python -m hvd_dqn.train` under horovodrun: who writes, resume, and real learning."""
import csv
import json
import pathlib
import re

import numpy as np
import pytest

from hvd_dqn.agent.schedules import LinearSchedule
from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, horovodrun, python_module, run, traced_by_rank, writes_under

# A short run: enough updates and checkpoints to exercise every phase, not to learn.
SHORT_RUN = ["--env_id=CartPole-v1", "--num_envs=2", "--learning_starts=200", "--batch_size=32",
             "--replay_capacity=5000", "--train_frequency=4", "--hidden_sizes=32,32", "--log_interval_env_steps=1000",
             "--eval_interval_env_steps=2000", "--eval_episodes=4", "--checkpoint_interval_env_steps=2000",
             "--epsilon_decay_env_steps=8000", "--target_update_period=50"]


def _train(np_, logdir, *flags, timeout=600):
    return horovodrun(np_, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", *SHORT_RUN, *flags], timeout=timeout)


def _metrics(logdir):
    with open(pathlib.Path(logdir) / "metrics.csv") as handle:
        return list(csv.DictReader(handle))


def test_rank_0_is_the_only_writer(tmp_path):
    logdir, traces = tmp_path / "run", tmp_path / "traces"
    traces.mkdir()
    # Each rank runs under strace, recording its file-system calls in a trace named after its rank.
    horovodrun(2, traced_by_rank(traces) + [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", *SHORT_RUN,
                                            "--total_env_steps=4000"], timeout=600)
    writes = {rank: writes_under(traces / f"rank{rank}.trace", logdir) for rank in (0, 1)}
    assert any("state.index" in line for line in writes[0]), "the trace must see rank 0's checkpoint writes"
    assert any("metrics.csv" in line for line in writes[0])
    assert writes[1] == [], "rank 1 wrote into the logdir:\n" + "\n".join(writes[1][:10])
    complete = checkpoint.complete_checkpoints(str(logdir))
    assert [pathlib.Path(path).name for path in complete] == ["ckpt-000000002000", "ckpt-000000004000"]
    digests = checkpoint.read_counters(complete[-1])["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]


def test_a_second_job_into_a_logdir_in_use_stops_with_one_line_and_writes_nothing(tmp_path):
    """A job resubmitted while the first still runs would append to its logs and prune its checkpoints; rank 0
    holds the kernel's lock on the folder, so the second stops before writing anything."""
    import fcntl
    import os

    logdir = tmp_path / "run"
    logdir.mkdir()
    held = os.open(logdir, os.O_RDONLY)  # as the first job's rank 0 holds it
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused = python_module("hvd_dqn.train", [f"--logdir={logdir}", *SHORT_RUN, "--total_env_steps=1000"],
                                timeout=300, check=False)
    finally:
        os.close(held)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert refused.stderr.strip().splitlines()[-1] == (
        f"hvd_dqn.train: error: --logdir={logdir}: another training job is writing there; wait for it to finish, "
        "or choose another --logdir")
    assert list(logdir.iterdir()) == []


def test_scaled_schedules_keep_the_step_size_on_one_ranks_env_step_clock(tmp_path):
    """--rank_scaling=batch, 2 ranks, --scale_schedules_by_workers: the step size decays over half the updates
    (and the target network is copied every half as many), so at each env step it is where one rank's would be."""
    logdir = tmp_path / "run"
    result = _train(2, logdir, "--total_env_steps=3000", "--rank_scaling=batch", "--scale_schedules_by_workers",
                    "--noscale_lr_by_workers", "--learning_rate=0.001", "--learning_rate_end=0.0001", "--lr_decay_updates=600")
    assert ("--scale_schedules_by_workers, 2 ranks: UpdateCountedSchedules(target_update_period=25, "
            "lr_warmup_updates=0, lr_decay_updates=300)") in result.stderr
    assert "makes 2 times fewer updates per env step" not in result.stderr  # the warning is for unscaled ones
    rows = [row for row in _metrics(logdir) if int(row["updates"]) > 0]
    assert len(rows) >= 2 and 0 < int(rows[0]["updates"]) < 300, rows  # rows during the decay, then after it
    for row in rows:  # metrics.csv's rate is the one the latest update used: update number `updates`, from 0
        latest = int(row["updates"]) - 1
        assert float(row["learning_rate"]) == pytest.approx(0.001 - 0.0009 * min(latest / 300, 1.0), rel=1e-5), row
    latest = int(rows[0]["updates"]) - 1  # without the flag the rate would have gone half as far by then
    assert float(rows[0]["learning_rate"]) < 0.001 - 0.0009 * latest / 600 - 1e-5


def test_resumed_run_continues_the_counters_and_keeps_learning(tmp_path):
    logdir = tmp_path / "run"
    # A step size decaying linearly from 1e-3 over 1,000 updates: the resumed half must go on from where the
    # optimizer's update count stopped, not restart the decay.
    # A target beyond CartPole's maximum of 500: the run never stops early, and the window of returns the stop
    # rule watches goes on across the resume.
    run_flags = ["--learning_rate=0.001", "--learning_rate_end=0.0001", "--lr_decay_updates=1000",
                 "--noscale_lr_by_workers", "--noscale_schedules_by_workers",
                 "--stop_at_train_return=600", "--stop_train_episodes=20"]
    # --auto_resume, the restartable job's one command line: fresh into an empty logdir, resumed after.
    _train(2, logdir, "--total_env_steps=4000", "--auto_resume", *run_flags)
    halfway = checkpoint.latest_checkpoint(str(logdir))
    first = checkpoint.read_counters(halfway)
    assert first["env_steps"] == 4000 and first["updates"] > 0 and first["episodes"] > 0

    # Without --resume, a fresh run would write among this run's checkpoints: refused, nothing touched.
    listing = sorted(path.name for path in (logdir / "checkpoints").iterdir())
    refused = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", *SHORT_RUN,
                             "--total_env_steps=8000", *run_flags], check=False)
    assert refused.returncode != 0
    assert (f"hvd_dqn.train: error: --logdir={logdir} already holds checkpoints of a run (newest "
            "ckpt-000000004000); add --resume to continue it, or choose another --logdir") in refused.stderr
    assert sorted(path.name for path in (logdir / "checkpoints").iterdir()) == listing

    _train(2, logdir, "--total_env_steps=8000", "--auto_resume", *run_flags)
    final_path = checkpoint.latest_checkpoint(str(logdir))
    final = checkpoint.read_counters(final_path)
    assert final["env_steps"] == 8000
    assert final["episodes"] > first["episodes"]
    with open(logdir / "episodes.csv") as handle:
        played = [float(row["return"]) for row in csv.DictReader(handle)]
    assert len(first["recent_returns"]) == 20 and final["recent_returns"] == played[-20:]
    # The replay memory is not checkpointed (yet), so the resumed half refills it first, exactly as the
    # first half did; its updates therefore equal the first half's.
    assert final["updates"] == 2 * first["updates"]

    rows = _metrics(logdir)
    resumed = [row for row in rows if int(row["env_steps"]) > 4000]
    assert [int(row["env_steps"]) for row in rows] == list(range(1000, 8001, 1000))
    # Exploration continues where it stopped instead of restarting at epsilon 1. A row logs the epsilon of the
    # job's last step: its 2 envs (one per rank, the job's envs split over the ranks) stepped from 2 before.
    schedule = LinearSchedule(1.0, 0.05, 8000)
    for row in resumed:
        assert float(row["epsilon"]) == pytest.approx(schedule(int(row["env_steps"]) - 2), abs=1e-4)
    assert int(resumed[-1]["updates"]) == final["updates"]
    for row in rows:  # metrics.csv logs the rate the latest update used: update number `updates`, counted from 0
        expected = 1e-3 * (1 - 0.9 * min((int(row["updates"]) - 1) / 1000, 1.0))
        assert float(row["learning_rate"]) == pytest.approx(expected, rel=1e-3), row
    assert float(rows[-1]["learning_rate"]) < 5e-4  # the decay went on past the resume (900 updates in all)

    import tensorflow as tf

    from hvd_dqn.agent.networks import build_mlp_q_network

    def online_weights(path):
        network = build_mlp_q_network((4,), 2, (32, 32), "online")
        tf.train.Checkpoint(online=network).read(str(pathlib.Path(path) / "state")).expect_partial()
        return np.concatenate([variable.numpy().ravel() for variable in network.variables])

    assert not np.array_equal(online_weights(halfway), online_weights(final_path))


def _first_run_commands():
    """The README's first-run commands, as typed: the code block under "A first run"."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## A first run", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines() if line.strip()]


def _first_run_env_steps():
    """The env steps at which the README says DQN's and PQN's first runs stop."""
    text = " ".join((REPO / "README.md").read_text().split("## A first run", 1)[1].split("```", 1)[0].split())
    dqn = re.search(r"DQN stops at (\d[\d,]*\d) env steps", text)
    pqn = re.search(r"PQN at (\d[\d,]*\d)", text)
    assert dqn and pqn, text
    return int(dqn.group(1).replace(",", "")), int(pqn.group(1).replace(",", ""))


def test_the_readmes_first_run_figures_are_its_evidence():
    """results/first_run/ holds the runs the README's figures were read from: each stopped where the README says."""
    for run, steps in zip(("cartpole_dqn", "cartpole_pqn"), _first_run_env_steps()):
        with open(REPO / "results" / "first_run" / run / "metrics.csv") as handle:
            assert int(list(csv.DictReader(handle))[-1]["env_steps"]) == steps, run


def test_the_readmes_first_run_works_as_typed(tmp_path):
    """The README's first commands, each run as typed in the repository's folder with only `runs/` moved to a
    temporary folder: DQN's CartPole preset is solved as gymnasium defines it (the last 100 training episodes,
    as played, average at least 475) by at most 1.5 times the env steps the README states (a fixed seed: a change
    of behaviour that costs more fails here until the README and results/first_run/ are renewed; rounding on
    another CPU moves the stop by a log point or a few, inside that), its greedy policy plays 20 fresh
    episodes at 450 or more and is filmed, its curve is drawn, and PQN's preset is solved too, also where the
    README says. One rank each, because the suite runs two test files at once: a two-rank job updates in
    lockstep and sharing the cores made it 2.6 times slower."""
    commands = _first_run_commands()
    stated = dict(zip(("cp", "cp_pqn"), _first_run_env_steps()))
    assert len(commands) == 4 and commands[0].startswith("FLAGFILE=configs/cartpole.flags scripts/train.sh")
    runs = tmp_path / "runs"
    outputs = []
    for command in commands:
        result = run(["bash", "-c", command.replace("runs/", f"{runs}/")], timeout=1500, check=False)
        assert result.returncode == 0, (command, result.stdout[-3000:], result.stderr[-3000:])
        outputs.append(result.stdout)
    for logdir, budget in ((runs / "cp", 100_000), (runs / "cp_pqn", 500_000)):
        final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
        with open(logdir / "episodes.csv") as handle:
            played = [float(row["return"]) for row in csv.DictReader(handle)]
        assert final["env_steps"] <= budget and final["recent_returns"] == played[-100:]
        # Exactly the README's figure on the CPU of results/first_run/; another CPU's rounding can move the stop
        # to another log point (PQN's has stopped at 260,000 where it stops at 360,000 there), so the suite, which
        # runs on any machine, holds a run to the README within that spread: later than 1.5 times the stated env
        # steps is a change of behaviour, not rounding.
        assert final["env_steps"] <= 1.5 * stated[logdir.name], (
            f"{logdir.name} stopped at {final['env_steps']:,} env steps where the README says {stated[logdir.name]:,}: "
            "re-measure results/first_run/ as its README says and renew the README's figures with it")
        assert np.mean(played[-100:]) >= 475, (logdir, final["env_steps"], np.mean(played[-100:]))
    assert (runs / "cp" / "cartpole.mp4").stat().st_size > 0 and (runs / "cp" / "cartpole.png").stat().st_size > 0
    # The README's evaluation, as typed, prints its report (20 greedy episodes by default) as JSON.
    result, _ = json.JSONDecoder().raw_decode(outputs[1][outputs[1].index("{"):])
    assert result["episodes"] == 20 and result["mean_return"] >= 450, result


@pytest.mark.parametrize("rank_scaling", ["batch", "updates"])
def test_rank_scaling_sets_the_updates_per_env_step_of_two_ranks(tmp_path, rank_scaling):
    """SHORT_RUN at np 2 (--num_envs=2, --train_frequency=4, --learning_starts=200): in both modes the job's
    2 envs are split (1 per rank) and each rank starts at its 100 of the job's 200 transitions. batch: each rank
    pays for its updates alone; updates: both ranks' steps pay for each update."""
    _train(2, tmp_path / "run", "--total_env_steps=4000", f"--rank_scaling={rank_scaling}")
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(tmp_path / "run")))
    ranks, frequency, starts, envs = 2, 4, 200, 1
    sharing = ranks if rank_scaling == "updates" else 1
    first_iteration = -(-(starts // ranks) // envs)  # the iteration whose memories reach the start
    iterations = 4000 // (ranks * envs) - first_iteration + 1
    assert final["updates"] == iterations * envs * sharing // frequency
    assert final["updates"] == {"batch": 475, "updates": 950}[rank_scaling]
    digests = final["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    with open(tmp_path / "run" / "episodes.csv") as handle:
        played_in = {(int(row["rank"]), int(row["env"])) for row in csv.DictReader(handle)}
    assert played_in == {(rank, env) for rank in range(ranks) for env in range(envs)}


@pytest.mark.parametrize("flag, message", [
    ("--batch_size=33", "--rank_scaling=updates: --batch_size=33 (the global batch) must split evenly over the 2 "
                        "ranks"),
    ("--num_envs=3", "--num_envs=3 (the job's envs) must split evenly over the 2 ranks (or add --counts_per_rank "
                     "for that many envs on each rank)"),
])
def test_a_global_batch_or_env_count_that_does_not_split_over_the_ranks_is_named(tmp_path, flag, message):
    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={tmp_path}", *SHORT_RUN, flag,
                            "--rank_scaling=updates"], timeout=300, check=False)
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).splitlines()
    reports = [line for line in lines if f"hvd_dqn.train: error: {message}" in line]
    assert len(reports) == 1 and reports[0].startswith("[0]"), "\n".join(lines)
    # horovodrun adds its own summary of the failed job; the ranks themselves print no traceback.
    assert not [line for line in lines if line.startswith(("[0]", "[1]")) and "Traceback" in line]


def test_training_stops_once_the_latest_training_episodes_average_the_target(tmp_path):
    """--stop_at_train_return: gymnasium's "solved", checked at each log point (SHORT_RUN: every 1,000 env
    steps) over the latest --stop_train_episodes episodes as played. A random CartPole policy lasts about 22
    steps, so 20 episodes averaging 10 are there at the first log point. A target never reached (and the window
    kept across a resume): test_resumed_run_continues_the_counters_and_keeps_learning."""
    logdir = tmp_path / "run"
    _train(2, logdir, "--total_env_steps=4000", "--stop_at_train_return=10", "--stop_train_episodes=20")
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert final["env_steps"] == 1000
    with open(logdir / "episodes.csv") as handle:
        played = [float(row["return"]) for row in csv.DictReader(handle)]
    assert len(played) > 20 and final["recent_returns"] == played[-20:]
    assert np.mean(final["recent_returns"]) >= 10



def test_evaluations_leave_the_training_run_as_it_is(tmp_path):
    """Evaluation acts with a generator of its own: a run that evaluates (SHORT_RUN, every 2,000 env steps, with
    --eval_epsilon's random actions) plays the same training episodes and ends with the same weights as the run that
    never evaluates. (It once drew from the training actor's stream, and shifted every exploration after it.)"""
    from conftest import episodes_without_wall_time

    flags = ["--total_env_steps=4000", "--eval_epsilon=0.05"]
    _train(1, tmp_path / "evaluated", *flags)
    _train(1, tmp_path / "not_evaluated", *flags, "--eval_interval_env_steps=0")
    evaluated = _metrics(tmp_path / "evaluated")
    assert [row["eval_return_mean"] != "" for row in evaluated] == [False, True, False, True]
    assert episodes_without_wall_time(tmp_path / "evaluated" / "episodes.csv") == \
        episodes_without_wall_time(tmp_path / "not_evaluated" / "episodes.csv")
    digests = [checkpoint.read_counters(checkpoint.latest_checkpoint(str(tmp_path / name)))["replica_weight_digests"]
               for name in ("evaluated", "not_evaluated")]
    assert digests[0] == digests[1]
