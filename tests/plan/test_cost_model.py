"""The cost model (hvd_dqn/plan/cost_formula.py) and its command, python -m hvd_dqn.plan.cost_model:
the per-rank shapes, the formula on hand-worked numbers, the study's seconds, the GPU table's assumptions, a
real measurement and validation on CartPole, and bad arguments as one line. How close the predictions come is
a benchmark figure (results/cost_model/), never asserted here."""
import dataclasses
import json
import os

import pytest

import numpy as np

from hvd_dqn.agent.configs import make_config
from hvd_dqn.envs import EnvSpec
from hvd_dqn.measure.benchmark_workers import BenchmarkError
from hvd_dqn.measure.update_costs import update_settings
from hvd_dqn.plan import cost_formula, gpu_costs, gpu_paper, hardware_profiles

from conftest import REPO, python_module

CARTPOLE = f"--flagfile={REPO / 'configs' / 'cartpole.flags'}"
# Observations as hvd_dqn's Atari envs and CartPole give them (hvd_dqn.envs.spec_of), without starting an emulator.
ATARI = EnvSpec((4, 84, 84), np.dtype(np.uint8), 4)
CARTPOLE_SPEC = EnvSpec((4,), np.dtype(np.float32), 2)
# Dopamine's DQN preset on the Nature CNN of the built-in profiles' update (valid padding): its update is the one they
# timed, so a paper table of it times nothing.
VALID_PADDING = ["--", "--conv_padding=valid"]


def test_each_mode_gives_a_rank_its_share():
    # updates: the job's 8 envs, batch 128 and one update per 2 env steps, split over 2 ranks.
    assert cost_formula.rank_shape("updates", 8, 128, 2, 2) == cost_formula.RankShape(2, 4, 64, 1.0)
    # batch: the job's envs split, but each rank a whole batch per 2 env steps of its own.
    assert cost_formula.rank_shape("batch", 8, 128, 2, 2) == cost_formula.RankShape(2, 4, 128, 2.0)
    assert cost_formula.rank_shape("updates", 8, 128, 2, 1) == cost_formula.RankShape(1, 8, 128, 2.0)
    with pytest.raises(cost_formula.ShapeError, match="--batch_size=100 does not split evenly over 8 workers"):
        cost_formula.rank_shape("updates", 8, 100, 2, 8)
    with pytest.raises(cost_formula.ShapeError, match="the job's 6 envs do not split evenly over 4 workers"):
        cost_formula.rank_shape("batch", 6, 32, 4, 4)


def test_the_formula_on_numbers_worked_by_hand():
    # Two ranks, one env step each per update at 1 ms, a 2 ms update and a 1 ms allreduce: 4 ms per update,
    # in which the job makes 2 env steps: 500 per second.
    shape = cost_formula.RankShape(2, 4, 64, 1.0)
    assert cost_formula.seconds_per_update(shape, 1e-3, 2e-3, 1e-3) == pytest.approx(4e-3)
    assert cost_formula.job_env_steps_per_s(shape, 1e-3, 2e-3, 1e-3) == pytest.approx(500.0)
    # Overlapped (a GPU node), acting hides behind learning and the sync: 3 ms per update.
    assert cost_formula.job_env_steps_per_s(shape, 1e-3, 2e-3, 1e-3, overlap=True) == pytest.approx(2 / 3e-3)
    # The ring: 2(N-1) steps of 1/N of the bytes, each with its latency; nothing to do alone.
    assert cost_formula.ring_allreduce_s(8e6, 1, 1e9, 1e-5) == 0.0
    assert cost_formula.ring_allreduce_s(8e6, 4, 1e9, 1e-5) == pytest.approx(6 * (2e-3 + 1e-5))
    assert cost_formula.prediction_error(110.0, 100.0) == pytest.approx(0.10)


def test_seconds_to_a_studys_target_come_from_its_env_steps_over_the_predicted_rate(tmp_path):
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"runs": [
        {"ranks": 1, "seed": 0, "env_steps_to_target": 60000, "wall_s_to_target": 100.0},
        {"ranks": 1, "seed": 1, "env_steps_to_target": 80000, "wall_s_to_target": 140.0},
        {"ranks": 1, "seed": 2, "env_steps_to_target": None, "wall_s_to_target": None},  # did not reach it
        {"ranks": 2, "seed": 0, "env_steps_to_target": 72000, "wall_s_to_target": 90.0}]}))
    from hvd_dqn.plan.cost_model import against_study, load_study

    predicted = {1: {"predicted_env_steps_per_s": 700.0}, 2: {"predicted_env_steps_per_s": 1000.0}}
    against_study(load_study(str(study)), predicted)
    assert predicted[1]["study_env_steps_to_target"] == 70000  # the median of the runs that reached it
    assert predicted[1]["predicted_s_to_target"] == 100.0 and predicted[1]["measured_s_to_target"] == 120.0
    assert predicted[1]["time_error"] == pytest.approx(100 / 120 - 1, abs=1e-3)
    assert predicted[2]["predicted_s_to_target"] == 72.0 and predicted[2]["time_error"] == -0.2


def test_the_gpu_table_shows_where_updates_mode_stops_scaling():
    # Dopamine's Breakout network: 16.2 MB of float32 gradients; Atari observations of 28,224 B; 4 envs per GPU.
    rows = cost_formula.paper_rows(hardware_profiles.H200_16CORE, gradient_bytes=16_181_904, observation_bytes=28_224,
                                   batch_size=32, train_frequency=4, envs_per_gpu=4)
    by = {(row["workers"], row["rank_scaling"]): row for row in rows}
    assert by[(1, "updates")]["speedup"] == by[(1, "batch")]["speedup"] == 1.0 and by[(1, "batch")]["sync_ms"] == 0
    for workers in (8, 32):
        # A GPU's update costs the same at 32/N as at 32, so splitting the batch buys almost nothing, while
        # whole batches per GPU scale up to N.
        assert by[(workers, "updates")]["speedup"] < 2 < by[(workers, "batch")]["speedup"] <= workers
    assert by[(32, "batch")]["sync_ms"] > by[(8, "batch")]["sync_ms"]  # InfiniBand is slower than NVLink


def test_one_gpus_row_is_the_profiles_parts_added_by_hand():
    profile = hardware_profiles.H200_16CORE
    # 4 envs: forward 0.80 ms + 4 / 3,555 s of emulators + the host's call and 4 stores; one update per vector
    # step: the batch of 32 from the host (1.15 ms) and its gather of 32 x 2 x 28,224 B.
    acting = 0.80 + 4000 / 3555 + profile.host_call_ms + 4 * profile.host_store_ms
    update = 1.15 + 32 * 2 * 28_224 * profile.host_gather_ns_per_byte * 1e-6
    assert gpu_costs.acting_ms(profile, 4) == pytest.approx(acting)
    assert gpu_costs.dqn_update_ms(profile, 32, 28_224) == pytest.approx(update)
    [in_order] = cost_formula.paper_rows(profile, 16_181_904, 28_224, 32, 4, 4, layouts=((1, 1),),
                                         modes=("batch",), learning=cost_formula.GpuLearning(False, False))
    [overlapped] = cost_formula.paper_rows(profile, 16_181_904, 28_224, 32, 4, 4, layouts=((1, 1),),
                                           modes=("batch",), learning=cost_formula.GpuLearning(True, False))
    assert in_order["env_steps_per_s"] == pytest.approx(4000 / (acting + update), abs=0.1)
    assert overlapped["env_steps_per_s"] == pytest.approx(4000 / max(acting, update), abs=0.1)
    # Between two sizes measured, log-log interpolation; below the smallest, the smallest's figure (launch-bound);
    # above the largest, in proportion.
    assert gpu_costs.table_value({32: 1.0, 128: 4.0}, 64, "proportional") == pytest.approx(2.0)
    assert gpu_costs.table_value({32: 1.0, 128: 4.0}, 8, "proportional") == 1.0
    assert gpu_costs.table_value({32: 1.0, 128: 4.0}, 256, "proportional") == 8.0
    assert gpu_costs.table_value({32: 1.0, 128: 4.0}, 256, "flat") == 4.0


def test_another_agents_update_is_dqns_and_its_extra_arithmetic_at_the_full_devices_cost_per_sample():
    profile = hardware_profiles.H200_16CORE
    per_sample = (2.59 - 1.45) / (2048 - 1024)  # the H200's DQN update, batch on the device, 1,024 to 2,048
    assert gpu_costs.device_ms_per_sample(profile) == pytest.approx(per_sample)
    assert gpu_costs.agent_extra_ms(profile, 32, 15.9) == pytest.approx(14.9 * 32 * per_sample)  # about 0.53 ms
    assert gpu_costs.agent_extra_ms(profile, 32, 0.9) == 0.0  # no cheaper than DQN's launches, copy and gather
    rows = {ratio: cost_formula.paper_rows(profile, 16_181_904, 28_224, 32, 4, 4, layouts=((1, 1),),
                                           modes=("batch",), learning=cost_formula.GpuLearning(False, False, ratio))[0]
            for ratio in (1.0, 15.9)}
    assert rows[15.9]["learn_ms"] == pytest.approx(rows[1.0]["learn_ms"] + 14.9 * 32 * per_sample, abs=2e-3)
    assert rows[15.9]["env_steps_per_s"] < rows[1.0]["env_steps_per_s"]
    with pytest.raises(hardware_profiles.ProfileError, match="'gtx1080-2016' has fewer than two DQN update figures"):
        cost_formula.paper_rows(hardware_profiles.GTX1080_2016, 16_181_904, 28_224, 32, 4, 1,
                                learning=cost_formula.GpuLearning(update_cost_ratio=2.0))


def test_the_paper_table_of_another_agent_gives_its_update_ratio_and_where_it_comes_from(tmp_path):
    def paper(preset, *more):
        report = tmp_path / f"{preset}.json"
        result = python_module("hvd_dqn.plan.cost_model", [f"--flagfile={REPO / 'configs' / preset}", "--paper",
                                                           "--layouts=1x1", f"--json={report}", *more], timeout=300)
        return result.stdout, json.loads(report.read_text())

    stdout, iqn = paper("breakout_iqn.flags", "--update_cost_ratio=15.9")
    assert iqn["update_cost_ratio"] == 15.9 and iqn["update_cost_ratio_source"] == "--update_cost_ratio=15.9"
    assert "IQN, acting" in stdout and "the ratio 15.90x is --update_cost_ratio=15.9" in stdout
    # Drawn ahead (uniform replay), one GPU's update is the larger of the gather and the update with its extra.
    profile = hardware_profiles.H200_16CORE
    update = 1.15 + gpu_costs.agent_extra_ms(profile, 32, 15.9)
    assert iqn["rows"][0]["learn_ms"] == pytest.approx(max(update, gpu_costs.gather_ms(profile, 2 * 32 * 28_224)),
                                                       abs=1e-3)
    # Without the figure, the command times the preset's update against the one the profile timed, here: QR-DQN
    # on the Nature CNN with same padding (Dopamine's) against plain DQN with valid padding (the H200's).
    stdout, qrdqn = paper("breakout_qrdqn.flags")
    assert qrdqn["update_cost_ratio_source"].startswith(
        "measured here: the update of QR-DQN (num_quantiles=200) on the Nature CNN (same padding) without double "
        "DQN, dueling heads or noisy layers took ")
    assert "that of DQN on the Nature CNN (valid padding) without double DQN" in qrdqn["update_cost_ratio_source"]
    assert 1 < qrdqn["update_cost_ratio"] < 100 and "measured here" in stdout
    # A rollout agent is told by its registry entry, not its name: PQN's table, with no replay update to price.
    stdout, pqn = paper("breakout_pqn.flags")
    assert (pqn["agent"], pqn["memory"], pqn["rank_scaling"]) == ("pqn", "rollout", "counts_per_rank")
    assert "PQN, every GPU with the preset's rollout and minibatches" in stdout and "its update:" not in stdout


def test_a_preset_is_priced_against_the_update_its_profile_timed():
    qrdqn = make_config(agent="qrdqn")
    # A profile calibrated with a QR-DQN preset timed QR-DQN's update: pricing QR-DQN's extra arithmetic on top of
    # it would count that arithmetic twice. Its ratio is 1, and nothing is timed to find it.
    ratio, source = gpu_paper.update_cost_ratio(qrdqn, ATARI, None, update_settings(qrdqn, ATARI))
    assert ratio == 1.0
    assert source == "the preset's own update is the one the profile timed"
    assert hardware_profiles.describe_update(update_settings(qrdqn, ATARI)) == (
        "QR-DQN (num_quantiles=200) on the Nature CNN (valid padding) without double DQN, dueling heads or noisy "
        "layers")
    # The built-in profiles timed plain DQN's update on the Nature CNN with valid padding: DQN without extras on
    # Atari's frames is that update; double DQN (one more forward pass of the online network), same padding (a
    # dense layer of 2.5 times the weights) and QR-DQN are not, and are timed against it.
    timed = hardware_profiles.H200_16CORE.update_timed
    assert update_settings(make_config(agent="dqn"), ATARI) == timed
    assert update_settings(make_config(agent="dqn", double_dqn=True), ATARI) != timed
    assert update_settings(make_config(agent="dqn", conv_padding="same"), ATARI) != timed
    assert update_settings(qrdqn, ATARI)["agent"] == "qrdqn" and update_settings(qrdqn, ATARI)["num_quantiles"] == 200
    # The network as built: "auto" is an MLP on CartPole's numbers, named with its widths and no padding.
    assert update_settings(make_config(agent="dqn", hidden_sizes=(64, 64)), CARTPOLE_SPEC) == {
        "agent": "dqn", "network": "mlp", "hidden_sizes": [64, 64], "double_dqn": False, "dueling": False,
        "noisy_nets": False, "layer_norm": False}
    # A setting of another agent is not part of this one's update.
    assert "num_atoms" not in update_settings(qrdqn, ATARI) and "layer_norm" not in update_settings(qrdqn, ATARI)
    assert gpu_paper.update_cost_ratio(qrdqn, ATARI, 1.19, hardware_profiles.PLAIN_DQN_UPDATE) == (
        1.19, "--update_cost_ratio=1.19")
    # A profile's update that cannot be built here is one line, before anything is timed.
    with pytest.raises(BenchmarkError, match="the profile timed the update of --agent=myagent, which is not "
                                             "registered here"):
        gpu_paper.update_cost_ratio(qrdqn, ATARI, None, {"agent": "myagent", "network": "nature_cnn"})
    with pytest.raises(BenchmarkError, match="the profile's update_timed names num_heads, which no --flag"):
        gpu_paper.update_cost_ratio(qrdqn, ATARI, None, {"agent": "dqn", "network": "nature_cnn", "num_heads": 4})


def test_a_preset_on_other_observations_than_its_profile_is_refused_in_one_line():
    # Every part of the built-in profiles was timed on Atari's frames: CartPole's preset would borrow a CNN's
    # update times and an Atari emulator's speed, whatever ratio it is given.
    result = python_module("hvd_dqn.plan.cost_model", [CARTPOLE, "--paper", "--update_cost_ratio=1"], timeout=300,
                           check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == (
        "hvd_dqn.plan.cost_model: error: profile h200-16core was timed on observations of shape 4x84x84, and "
        "CartPole-v1's are 4: its times are not this preset's; write a profile with this preset (python -m "
        "hvd_dqn.plan.calibrate --flagfile=PRESET --out=PROFILE.json)")


def test_drawing_ahead_hides_the_gather_behind_the_update_and_its_exchange():
    profile = hardware_profiles.H200_16CORE
    gather = 32 * 2 * 28_224 * profile.host_gather_ns_per_byte * 1e-6
    step = 1.15 + 1.0  # the update from the host and a 1 ms exchange
    # Drawn ahead, the larger of the draw and the update with its exchange; in line with one update per env step,
    # both; with 4 updates per env step the first draw in line and the other three beside an update.
    assert cost_formula.update_with_exchange_ms(profile, 32, 28_224, 1.0, 1, True) == pytest.approx(max(gather, step))
    assert cost_formula.update_with_exchange_ms(profile, 32, 28_224, 1.0, 1, False) == pytest.approx(gather + step)
    assert cost_formula.update_with_exchange_ms(profile, 32, 28_224, 1.0, 4, False) == pytest.approx(
        (gather + 3 * max(gather, step) + step) / 4)
    # Dopamine's preset, 4 envs per GPU: drawn in line, 8 GPUs wait on learning; drawn ahead, on their acting.
    rows = {draw_ahead: {row["workers"]: row for row in cost_formula.paper_rows(
        profile, 16_181_904, 28_224, 32, 4, 4, modes=("batch",),
        learning=cost_formula.GpuLearning(draw_ahead=draw_ahead))}
        for draw_ahead in (False, True)}
    assert rows[False][8]["learn_ms"] > rows[False][8]["act_ms_per_update"]
    assert rows[True][8]["learn_ms"] < rows[True][8]["act_ms_per_update"] and rows[True][8]["speedup"] == 8.0
    assert rows[False][8]["speedup"] < 7.0 and rows[False][1]["env_steps_per_s"] == rows[True][1]["env_steps_per_s"]


def test_the_h200_profile_reproduces_its_measured_loops_from_its_parts():
    profile = hardware_profiles.H200_16CORE
    rows = gpu_costs.validation_rows(profile)
    assert [row["measured"] for row in rows] == [1194, 1326, 1618, 4329, 1411, 2914]
    for row in rows:
        assert abs(row["error"]) <= 0.25, row
    # The three host costs are the least-squares fit to those loops, not numbers chosen by hand.
    fitted = gpu_costs.fit_host_costs(profile)
    assert (profile.host_call_ms, profile.host_store_ms, profile.host_gather_ns_per_byte) == pytest.approx(
        fitted, rel=1e-3)
    # Without them the parts alone put Dopamine's shape (16 envs, 4 updates of 32 per vector step) near twice
    # as fast as it ran: the host's gather and store are what the loops add.
    bare = dataclasses.replace(profile, host_call_ms=0.0, host_store_ms=0.0, host_gather_ns_per_byte=0.0)
    assert gpu_costs.validation_rows(bare)[0]["error"] > 0.5


def test_every_figure_of_the_built_in_profiles_has_its_source():
    for profile in hardware_profiles.BUILT_IN.values():
        exchange_fields = tuple(hardware_profiles.Exchange.__annotations__)
        for field in (*hardware_profiles.TABLES, *hardware_profiles.SCALARS, *exchange_fields):
            value = getattr(profile.exchange if field in exchange_fields else profile, field)
            if value:
                assert len(profile.sources.get(field, "")) > 20, (profile.name, field)
        # Each profile survives its JSON form unchanged.
        assert hardware_profiles.profile_from_json(profile.to_json(), "test") == profile


def test_the_gtx1080_profile_gives_the_earlier_table():
    # One env per GPU, 1.15 ms per env step and 2.6 ms per update: the table the model gave before it had profiles
    # (results/cost_model/gpu_paper_breakout_dopamine.json).
    rows = cost_formula.paper_rows(hardware_profiles.GTX1080_2016, 16_181_904, 28_224, 32, 4, 1)
    by = {(row["workers"], row["rank_scaling"]): row["env_steps_per_s"] for row in rows}
    assert (by[(1, "batch")], by[(8, "batch")], by[(8, "updates")], by[(32, "batch")]) == (869.6, 6956.5, 1062.6,
                                                                                          25087.7)


def test_time_to_a_score_is_the_env_steps_each_rank_count_needed_over_its_throughput():
    rows = [dict(workers=1, rank_scaling="batch", env_steps_per_s=1000.0),
            dict(workers=8, rank_scaling="batch", env_steps_per_s=8000.0),
            dict(workers=32, rank_scaling="batch", env_steps_per_s=25000.0),
            dict(workers=8, rank_scaling="updates", env_steps_per_s=1200.0)]
    cost_formula.add_time_to_score(rows, {1: (3_600_000, "one rank"), 8: (4_500_000, "eight ranks")}, "batch")
    one, eight, thirty_two, other_mode = rows
    # One rank: 3.6M env steps at 1,000 a second are one hour; 8 ranks: 1.25x the env steps at 8x the rate.
    assert (one["hours_to_score"], one["env_steps_ratio"], one["speedup_to_score"]) == (1.0, 1.0, 1.0)
    assert (eight["hours_to_score"], eight["env_steps_ratio"], eight["score_source"]) == (0.156, 1.25, "eight ranks")
    assert eight["speedup_to_score"] == 6.4  # 8x the throughput, 1/1.25 of it kept
    assert (one["seconds_to_score"], eight["seconds_to_score"]) == (3600.0, 562.5)
    # A score of minutes: the speed-up comes from the times, not from hours rounded to 3 decimals (0.123 and
    # 0.015 would give 8.2x where the throughput and env steps give 7.97x).
    rows = [dict(workers=1, rank_scaling="batch", env_steps_per_s=870.0),
            dict(workers=8, rank_scaling="batch", env_steps_per_s=6956.0)]
    cost_formula.add_time_to_score(rows, {1: (386_088, "one rank"), 8: (387_088, "eight ranks")}, "batch")
    assert rows[1]["speedup_to_score"] == round(6956.0 / 870.0 * 386_088 / 387_088, 2) == 7.97
    # No figure for 32 ranks, and none for the other mode: their rows say nothing of a score.
    assert "hours_to_score" not in thirty_two and "hours_to_score" not in other_mode


def test_the_gpu_table_gives_hours_to_a_score_with_each_figures_source(tmp_path):
    report_path = tmp_path / "paper.json"
    # With valid padding the preset's update is the profile's own (VALID_PADDING), so nothing is timed here.
    result = python_module("hvd_dqn.plan.cost_model", [
        f"--flagfile={REPO / 'configs' / 'breakout_dopamine.flags'}", "--paper", f"--json={report_path}",
        "--env_steps_to_score", "1", "2,000,000", "a one-rank run", "--env_steps_to_score", "8", "1829400",
        "an 8-rank run", *VALID_PADDING], timeout=300)
    rows = {(row["workers"], row["rank_scaling"]): row for row in json.loads(report_path.read_text())["rows"]}
    for workers, steps in ((1, 2_000_000), (8, 1_829_400)):
        row = rows[(workers, "batch")]
        assert row["hours_to_score"] == round(steps / row["env_steps_per_s"] / 3600, 3)
    assert "hours_to_score" not in rows[(32, "batch")] and "hours_to_score" not in rows[(8, "updates")]
    # 0.9147 of one rank's env steps prints as 0.91x, not as the report's 0.915 rounded again (0.92x).
    assert rows[(8, "batch")]["env_steps_ratio"] == 0.915
    eight_rank_line = next(line for line in result.stdout.splitlines() if "an 8-rank run" in line)
    assert " 0.91x " in eight_rank_line, eight_rank_line


@pytest.mark.parametrize("arguments, message", [
    (["8", "1000", "eight"], "--env_steps_to_score: one rank's env steps (RANKS 1) are the baseline"),
    (["4", "1000", "four"], "--env_steps_to_score 4 1000 four: RANKS must be one of the table's GPU counts (1, 8, 32)"),
    (["1", "many", "one"], "--env_steps_to_score 1 many one: RANKS must be an integer and ENV_STEPS a number"),
    (["1", "1000", " "], "--env_steps_to_score 1 1000  : SOURCE must say where the figure comes from"),
])
def test_a_bad_score_figure_is_one_line(arguments, message):
    # Checked before anything is timed: Dopamine's preset, whose same padding the command would time, is refused
    # at once.
    result = python_module("hvd_dqn.plan.cost_model", [
        f"--flagfile={REPO / 'configs' / 'breakout_dopamine.flags'}", "--paper", "--env_steps_to_score", *arguments],
        timeout=300, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().startswith(f"hvd_dqn.plan.cost_model: error: {message}"), result.stderr


def test_pqn_gpu_table_pays_one_exchange_per_minibatch():
    profile = hardware_profiles.H200_16CORE
    # The Nature CNN with LayerNorm: 6.75 MB of float32 gradients; 8 envs x 128 steps, 4 minibatches of 256 x 4.
    rows = cost_formula.pqn_paper_rows(profile, gradient_bytes=6_750_096, observation_bytes=28_224, num_envs=8,
                                       rollout_steps=128, num_minibatches=4, update_epochs=4)
    by = {row["workers"]: row for row in rows}
    rollout_ms = 128 * gpu_costs.acting_ms(profile, 8) + 16 * gpu_costs.pqn_update_ms(
        profile, 256, 28_224)
    assert by[1]["sync_ms"] == 0 and by[1]["env_steps_per_s"] == pytest.approx(1_024_000 / rollout_ms, abs=0.1)
    for workers in (8, 32):
        expected = workers * 1_024_000 / (rollout_ms + 16 * by[workers]["sync_ms"])
        assert by[workers]["env_steps_per_s"] == pytest.approx(expected, rel=1e-3)
        assert 0.8 * workers < by[workers]["speedup"] < workers
    with pytest.raises(hardware_profiles.ProfileError, match="gtx1080-2016.* has no PQN update figures"):
        cost_formula.pqn_paper_rows(hardware_profiles.GTX1080_2016, 6_750_096, 28_224, 8, 128, 4, 4)


def test_an_exchange_measured_below_the_bare_allreduce_it_contains_is_taken_at_the_allreduce():
    from hvd_dqn.plan.cost_model import exchange_cost_s

    measured = {"exchange_in_update_ms": 0.35, "allreduce_ms_per_update": 0.23, "exchange_block_pairs": 30}
    assert exchange_cost_s(measured) == (pytest.approx(0.35e-3), None)
    # A median of three block differences on CartPole's small network can come out below zero.
    seconds, note = exchange_cost_s({**measured, "exchange_in_update_ms": -0.05, "exchange_block_pairs": 3})
    assert seconds == pytest.approx(0.23e-3)
    assert "measured -0.0500 ms, below the bare allreduce's 0.2300 ms" in note and "over 3 block pairs" in note


def test_the_command_measures_predicts_and_validates_on_cartpole(tmp_path):
    report_path = tmp_path / "model.json"
    result = python_module("hvd_dqn.plan.cost_model", [
        CARTPOLE, "--workers=1,2", "--rounds=1", "--round_seconds=0.5", "--validate", "--validate_rounds=1",
        "--measure_env_steps=1600", f"--workdir={tmp_path / 'runs'}", f"--json={report_path}", "--",
        "--learning_starts=400"], timeout=900)
    report = json.loads(report_path.read_text())
    costs = report["costs"]
    # The shapes 1 and 2 workers give a rank under the default --rank_scaling=batch: 8 and 4 envs (the job's 8
    # split), a whole batch of 128 each; the allreduce only where there is more than one worker.
    assert set(costs["act_s"]) == {"4", "8"} and set(costs["learn_s"]) == {"128"}
    assert all(value > 0 for value in [*costs["act_s"].values(), *costs["learn_s"].values(), costs["sync_s"]["2"]])
    assert costs["sync_s"]["1"] == 0.0 and costs["sync_bare_s"]["1"] == 0.0 and costs["sync_bare_s"]["2"] > 0
    assert costs["sync_s"]["2"] >= costs["sync_bare_s"]["2"]  # the exchange in the update holds the allreduce
    # t_learn is the stage's figure scaled to the trainer's update: a one-worker run's seconds per update, less
    # its acting (2 env steps per update at 8 envs), over the stage's figure at its batch of 128.
    calibration = costs["calibration_run"]
    trainer_learn_s = 1 / calibration["updates_per_s"] - 2 * costs["act_s"]["8"]
    assert costs["learn_scale"] == pytest.approx(trainer_learn_s / costs["learn_stage_s"]["128"])
    assert costs["learn_s"]["128"] == pytest.approx(trainer_learn_s)
    for workers in ("1", "2"):
        row = report["predictions"][workers]
        assert row["predicted_env_steps_per_s"] > 0 and row["measured_env_steps_per_s"] > 0
        assert row["error"] == round(row["predicted_env_steps_per_s"] / row["measured_env_steps_per_s"] - 1, 3)
        # t_sync is the exchange inside the update (the benchmark's exchange_in_update_ms); the bare allreduce
        # is reported beside it.
        assert row["sync_ms"] == round(1000 * costs["sync_s"][workers], 4)
        assert row["sync_bare_ms"] == round(1000 * costs["sync_bare_s"][workers], 4)
        shape = cost_formula.RankShape(int(workers), row["num_envs_per_rank"], row["batch_per_rank"],
                                     row["env_steps_per_update_per_rank"])
        assert row["predicted_env_steps_per_s"] == round(cost_formula.job_env_steps_per_s(
            shape, costs["act_s"][str(shape.num_envs)], costs["learn_s"]["128"], costs["sync_s"][workers]), 1)
    assert "2 worker(s): e=4 b=128 F_r=2" in result.stdout and "measured" in result.stdout


def test_the_paper_table_prints_every_assumption(tmp_path):
    result = python_module("hvd_dqn.plan.cost_model", [f"--flagfile={REPO / 'configs' / 'breakout_dopamine.flags'}",
                                                       "--paper", f"--json={tmp_path / 'paper.json'}",
                                                       *VALID_PADDING], timeout=300)
    report = json.loads((tmp_path / "paper.json").read_text())
    assert [(row["workers"], row["rank_scaling"]) for row in report["rows"]] == [
        (1, "updates"), (1, "batch"), (8, "updates"), (8, "batch"), (32, "updates"), (32, "batch")]
    for field in ("update_host_ms", "forward_ms", "host_gather_ns_per_byte", "exchange.negotiation_ms"):
        assert f"  {field} = " in result.stdout
    assert report["update_cost_ratio"] == 1.0 and "DQN, acting" in result.stdout  # the update the profile measured
    assert [row["error"] for row in report["validation"]] == [
        row["error"] for row in gpu_costs.validation_rows(hardware_profiles.H200_16CORE)]


@pytest.mark.parametrize("arguments, message", [
    (["--workers=0"], "--workers=0: must list distinct positive worker counts, e.g. 1,2"),
    (["--workers=1,{more}"], "--workers=1,{more}: one core per worker needs {more} cores; this machine has {cores} "
                             "(--paper predicts beyond it)"),
    (["--", "--rank_scaling=updates", "--batch_size=127"],
     "--workers=1,2: --rank_scaling=updates: --batch_size=127 (the global batch) must split evenly over the 2 ranks"),
    (["--rounds=0"], "--round_seconds, --rounds, --validate_rounds and --measure_env_steps must be positive"),
    (["--study=/nonexistent/study.json"], "--study=/nonexistent/study.json: cannot read it"),
    (["--update_cost_ratio=2"], "--update_cost_ratio=2: only with --paper for an agent that learns from a replay "
                                "memory"),
    (["--paper", "--update_cost_ratio=0"], "--update_cost_ratio=0: must be a positive number"),
    (["--", "--mixed_precision"], "--mixed_precision: its loss-scaled update always averages the gradients across "
                                  "ranks, so the update without its exchange (t_sync) cannot be timed beside it"),
])
def test_bad_arguments_are_one_line(arguments, message):
    cores = len(os.sched_getaffinity(0))
    arguments = [argument.format(more=cores + 1) for argument in arguments]
    result = python_module("hvd_dqn.plan.cost_model", [CARTPOLE, *arguments], timeout=300, check=False)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().startswith(f"hvd_dqn.plan.cost_model: error: {message.format(cores=cores, more=cores + 1)}"), \
        result.stderr[-2000:]
