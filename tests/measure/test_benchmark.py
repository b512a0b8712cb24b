"""The benchmark command runs each stage and reports every figure it promises, side by side."""
import csv
import json
import os
import statistics

import pytest

from conftest import PYTHON, REPO, horovodrun, python_module

KEYS = ("env_raw_steps_per_s", "actor_steps_per_s", "learner_updates_per_s", "plain_tf_updates_per_s",
        "replay_sample_batches_per_s", "bare_gather_batches_per_s", "train_steps_per_s",
        "train_steps_per_s_overlap", "train_steps_per_s_no_overlap", "overlap_efficiency",
        "overlap_efficiency_per_step", "balanced_train_frequency", "balanced_steps_per_s",
        "balanced_steps_per_s_overlap", "balanced_steps_per_s_in_order", "balanced_efficiency",
        "balanced_speedup", "policy_actions_per_s_batch1",
        "policy_actions_per_s_batch32", "policy_actions_per_s_batch256")


def test_benchmark_measures_every_stage_and_writes_json(tmp_path):
    report = tmp_path / "bench.json"
    result = python_module("hvd_dqn.measure.benchmark", [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                                                         "--replay_capacity=2000", "--learning_starts=1000",
                                                         "--train_frequency=2", "--noprioritized_replay",
                                                         "--round_seconds=0.3", "--rounds=2",
                                                         f"--json={report}"], timeout=300)
    results = json.loads(report.read_text())
    for key in KEYS:
        assert results[key] > 0, key
        assert key in result.stdout  # the printed table
    assert results["learner_vs_plain_tf"] == results["learner_updates_per_s"] / results["plain_tf_updates_per_s"]
    # Two float32 observations of 4 values, a uint8 action, float32 reward and discount, two flags.
    assert results["replay_bytes_per_transition"] == 2 * 4 * 4 + 1 + 4 + 4 + 2
    assert results["cores"] >= 1 and results["rounds"] == 2
    # At --train_frequency=2 each update pays for 2 env steps.
    assert results["overlap_efficiency"] == results["train_steps_per_s"] / min(
        results["actor_steps_per_s"], results["learner_updates_per_s"] * 2)
    # The balanced ratio: env steps per update at which learning's capacity equals acting's.
    acting, updates = results["actor_steps_per_s"], results["learner_updates_per_s"]
    balanced = results["balanced_train_frequency"]
    assert balanced == max(1, round(acting / updates))
    assert results["balanced_efficiency"] == results["balanced_steps_per_s"] / min(acting, updates * balanced)
    assert results["balanced_speedup"] == results["balanced_steps_per_s"] / results["balanced_steps_per_s_in_order"]


def test_benchmark_names_a_bad_setting(tmp_path):
    result = python_module("hvd_dqn.measure.benchmark", ["--rounds=0"], timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "hvd_dqn.measure.benchmark: error: --round_seconds and --rounds must be positive"


def test_two_ranks_measure_the_gradient_allreduce_beside_the_ring_formula(tmp_path):
    report = tmp_path / "bench.json"
    report.write_text(json.dumps({"env_raw_steps_per_s": 123.0}))  # the single-process part's figures stay
    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.measure.benchmark", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                            "--hidden_sizes=64,64", "--round_seconds=0.3", "--rounds=2", "--exchange_batch_size=16",
                            "--exchange_acting_ms=0.05", f"--json={report}"],
                        timeout=300)
    results = json.loads(report.read_text())
    assert results["env_raw_steps_per_s"] == 123.0 and results["ranks"] == 2
    # CartPole's MLP 4 -> 64 -> 64 -> 2, float32 gradients.
    assert results["gradient_bytes_per_update"] == 4 * (4 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2)
    assert results["allreduce_ms_per_update"] > 0 and results["loopback_bytes_per_s"] > 0
    assert results["ring_allreduce_ms_predicted"] == pytest.approx(
        1000 * 2 * (2 - 1) / 2 * results["gradient_bytes_per_update"] / results["loopback_bytes_per_s"])
    assert "allreduce_ms_per_update" in result.stdout
    # The exchange inside the trainer's own update: the update with DistributedOptimizer's allreduce against the
    # same update without it. Only the first kept the ranks' networks equal, so each timed what it claims.
    assert results["exchange_batch_size"] == 16 and results["exchange_acting_ms"] == 0.05
    assert results["update_exchanged_ms"] > 0 and results["update_alone_ms"] > 0
    # Timed in adjacent blocks of each: the exchange is the median of the blocks' paired differences.
    exchanged, alone = results["update_exchanged_blocks_ms"], results["update_alone_blocks_ms"]
    assert len(exchanged) == len(alone) == results["exchange_block_pairs"] >= 3
    assert results["update_exchanged_ms"] == pytest.approx(statistics.median(exchanged))
    assert results["update_alone_ms"] == pytest.approx(statistics.median(alone))
    assert results["exchange_in_update_ms"] == pytest.approx(statistics.median(
        [with_exchange - without for with_exchange, without in zip(exchanged, alone)]))
    assert results["exchanged_ranks_agree"] is True and results["alone_ranks_agree"] is False
    assert "exchange_in_update_ms" in result.stdout and "exchanged_ranks_agree" in result.stdout


def test_worker_scaling_times_one_and_two_bound_workers_in_turns(tmp_path):
    """python -m hvd_dqn.measure.benchmark_workers: each round trains 1 and 2 workers (one core each) from a fresh
    logdir; the rates come from each run's metrics.csv, the speed-up is the per-round ratio."""
    report_path = tmp_path / "workers.json"
    result = python_module("hvd_dqn.measure.benchmark_workers", [
        f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--workers=1,2", "--rounds=1", "--measure_env_steps=1600",
        "--log_points=2", "--corun", f"--workdir={tmp_path / 'runs'}", f"--json={report_path}", "--",
        "--learning_starts=400"], timeout=600)
    report = json.loads(report_path.read_text())
    one, two = report["runs"]
    assert (one["workers"], two["workers"], report["cores_per_rank"]) == (1, 2, 1)
    speedup = two["env_steps_per_s"] / one["env_steps_per_s"]
    assert (report["workers_speedup_2"], report["workers_efficiency_2"]) == (round(speedup, 3), round(speedup / 2, 3))
    # From the first log point with updates (800: the memory holds 400 transitions by then) to the end.
    assert one["measured_env_steps"] == two["measured_env_steps"] == 1600
    assert "workers_speedup_2" in result.stdout
    log = (tmp_path / "runs" / "workers2_round0.log").read_text()
    assert "cores: rank 0 on" in log and "; rank 1 on" in log
    assert json.loads((tmp_path / "runs" / "workers2_round0" / "config.json").read_text())["cores_per_rank"] == 1
    # --corun: two lone one-worker runs at once, each with one rank's share and that rank's core and seed.
    (corun,) = report["coruns"]
    lone = corun["lone_env_steps_per_s"]
    assert corun["workers"] == 2 and len(lone) == 2 and corun["env_steps_per_s"] == 2 * min(lone)
    assert report["corun_ceiling_2"] == round(2 * min(lone) / one["env_steps_per_s"], 3)
    assert report["share_of_ceiling_2"] == round(two["env_steps_per_s"] / (2 * min(lone)), 3)
    for rank in (0, 1):
        lone_run = tmp_path / "runs" / f"corun2_round0_rank{rank}"
        assert f"cores: rank 0 on {sorted(os.sched_getaffinity(0))[rank]}" in lone_run.with_suffix(".log").read_text()
        config = json.loads((lone_run / "config.json").read_text())
        assert (config["num_envs"], config["replay_capacity"], config["learning_starts"], config["seed"]) == \
            (4, 50_000, 200, rank)
        # Timed from the first log point with updates (400) to the last but one (1200); the last interval runs
        # untimed, so a lone run is never timed after its neighbour has stopped.
        rows = {row["env_steps"]: float(row["wall_time_s"]) for row in csv.DictReader((lone_run / "metrics.csv").open())}
        assert sorted(rows, key=int) == ["400", "800", "1200", "1600"]
        assert lone[rank] == pytest.approx(800 / (rows["1200"] - rows["400"]))


@pytest.mark.parametrize("arguments, message", [
    (["--workers=1,0"], "--workers=1,0: must list distinct positive worker counts, e.g. 1,2"),
    (["--workers=1,{more}"], "--workers=1,{more} with --cores_per_rank=1 needs {more} cores; this machine has {cores}"),
    (["--", "--logdir=x"], "--cores_per_rank, --logdir and --total_env_steps are the benchmark's to set; leave them "
                           "out of the flags after --"),
    (["--", "--rank_scaling=updates", "--batch_size=127"],
     "--workers=1,2: --rank_scaling=updates: --batch_size=127 (the global batch) must split evenly over the 2 ranks"),
    (["--", "--num_envs=3"], "--workers=1,2: --num_envs=3 (the job's envs) must split evenly over the 2 ranks (or add "
                             "--counts_per_rank for that many envs on each rank)"),
    (["--job_num_envs=8"], "--job_num_envs=8: only with --counts_per_rank (whose --num_envs counts per rank); without "
                           "it --num_envs=8 is the job's envs already"),
    (["--", "--num_envz=3"], "the runs' flags: Unknown command line flag 'num_envz'. Did you mean: num_envs ?"),
    (["--corun", "--", "--rank_scaling=updates", "--train_frequency=3"],
     "--corun: --rank_scaling=updates with --train_frequency=3: a rank of 2 updates every 3/2 of its env steps, "
     "which a one-worker run cannot; --corun needs a --train_frequency divisible by the workers"),
])
def test_bad_worker_scaling_arguments_are_one_line(tmp_path, arguments, message):
    cores = len(os.sched_getaffinity(0))
    arguments = [argument.format(more=cores + 1) for argument in arguments]
    result = python_module("hvd_dqn.measure.benchmark_workers", [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                                                                 *arguments], timeout=120, check=False)
    expected = f"hvd_dqn.measure.benchmark_workers: error: {message.format(cores=cores, more=cores + 1)}"
    assert result.returncode == 2 and result.stderr.strip() == expected


def test_every_second_round_runs_the_configurations_the_other_way_round():
    # A machine that speeds up or slows down over the benchmark then favours no configuration.
    from hvd_dqn.measure.benchmark_workers import round_order

    first = [("job", 1), ("job", 2), ("job", 4), ("corun", 2), ("corun", 4)]
    assert round_order([1, 2, 4], True, 0) == round_order([1, 2, 4], True, 2) == first
    assert round_order([1, 2, 4], True, 1) == round_order([1, 2, 4], True, 3) == first[::-1]
    assert round_order([1, 2], False, 1) == [("job", 2), ("job", 1)]
