"""python -m hvd_dqn.plan.calibrate: the profile it writes (its JSON form, read back by the cost model), the cost
model's prediction from it, the GPU set-up check, and bad inputs as one line. How close its figures come to the
benchmark's is a benchmark result (results/calibrate/), never asserted here."""
import json

import pytest

from hvd_dqn.plan import calibrate, cost_formula, gpu_costs, hardware_profiles

from conftest import REPO, python_module

CARTPOLE = f"--flagfile={REPO / 'configs' / 'cartpole.flags'}"


@pytest.fixture(scope="module")
def cartpole_profile(tmp_path_factory):
    """A profile of this machine for CartPole, its allreduce across 2 local ranks included."""
    path = tmp_path_factory.mktemp("calibrate") / "this_machine.json"
    result = python_module("hvd_dqn.plan.calibrate", [
        CARTPOLE, f"--out={path}", "--envs=1,4", "--batches=32,128", "--round_seconds=0.2", "--rounds=1",
        "--ranks=2", "--replay_rows=5000"], timeout=600)
    return path, result


def test_the_profile_is_complete_and_reads_back(cartpole_profile):
    path, result = cartpole_profile
    data = json.loads(path.read_text())
    assert data["version"] == hardware_profiles.PROFILE_VERSION and data["name"] == "this_machine"
    profile = hardware_profiles.load_profile(str(path))
    assert set(profile.update_host_ms) == set(profile.update_device_ms) == {32, 128}
    assert set(profile.forward_ms) == set(profile.emulator_steps_per_s) == {1, 4}
    for table in ("update_host_ms", "update_device_ms", "forward_ms", "emulator_steps_per_s"):
        assert all(value > 0 for value in getattr(profile, table).values()), table
        assert "measured by hvd_dqn.plan.calibrate" in profile.sources[table]
    assert profile.host_gather_ns_per_byte > 0 and profile.copy_bytes_per_s > 0
    assert profile.host_call_ms >= 0 and profile.host_store_ms >= 0
    # What it ran on: no GPU here, and Horovod's build.
    assert profile.machine["gpus"] == [] and profile.machine["horovod_gloo"] in (True, False)
    # The exchange: the ring at the loopback bandwidth plus the negotiation give back the measured allreduce.
    assert "across 2 local ranks took" in profile.sources["negotiation_ms"]
    measured_ms = float(profile.sources["negotiation_ms"].split(" took ")[1].split(" ms")[0])
    gradient_bytes = int(profile.sources["negotiation_ms"].split("allreduce of ")[1].split(" B")[0].replace(",", ""))
    ring_ms = 1000 * cost_formula.ring_allreduce_s(gradient_bytes, 2, profile.exchange.intra_node_bytes_per_s, 0.0)
    assert 1000 * cost_formula.gpu_sync_s(profile, gradient_bytes, 1, 2) == pytest.approx(max(measured_ms, ring_ms),
                                                                                          abs=2e-3)
    assert f"--profile={path}" in result.stdout
    # Whose update it timed, on what: the preset's, DQN with double DQN on an MLP of 256 and 256 units
    # (configs/cartpole.flags), on CartPole's 4 numbers.
    assert profile.update_timed == {"agent": "dqn", "network": "mlp", "hidden_sizes": [256, 256], "double_dqn": True,
                                    "dueling": False, "noisy_nets": False, "layer_norm": False}
    assert profile.observation_shape == (4,) and "observation_shape = 4: the observations" in result.stdout


def test_the_cost_model_predicts_this_machine_from_the_profile(cartpole_profile, tmp_path):
    path, _ = cartpole_profile
    report_path = tmp_path / "paper.json"
    result = python_module("hvd_dqn.plan.cost_model", [CARTPOLE, "--paper", f"--profile={path}",
                                                       "--layouts=1x1,1x2", f"--json={report_path}"], timeout=300)
    report = json.loads(report_path.read_text())
    profile = hardware_profiles.load_profile(str(path))
    assert report["profile"]["name"] == "this_machine" and "profile this_machine" in result.stdout
    # CartPole's preset: 8 envs per rank, a batch of 128 every 2 env steps, acting then learning (no pipeline for
    # envs stepped in Python): one rank's row is the profile's parts added by hand.
    one = next(row for row in report["rows"] if row["workers"] == 1 and row["rank_scaling"] == "batch")
    # Prioritised replay: nothing drawn ahead, the step's first minibatch in line and its other 3 beside an update.
    acting = gpu_costs.acting_ms(profile, 8)
    draw = gpu_costs.gather_ms(profile, 2 * 128 * report["observation_bytes"])
    update = profile.update_host_ms[128]
    assert report["overlap"] is False and report["draw_ahead"] is False
    # The profile timed this preset's own update (double DQN's): nothing is added to it.
    assert report["update_cost_ratio"] == 1.0
    assert report["update_cost_ratio_source"] == "the preset's own update is the one the profile timed"
    assert "its update: the profile's, DQN on an MLP (256,256) with double DQN; the ratio 1.00x" in result.stdout
    assert one["env_steps_per_s"] == pytest.approx(8000 / (acting + draw + 3 * max(draw, update) + update), abs=0.1)


def test_the_gpu_check_names_each_missing_piece_with_its_fix():
    facts = {"gpus": [], "horovod_nccl": False}
    problems = calibrate.gpu_check(facts, driver_present=True)
    assert len(problems) == 2
    assert problems[0].startswith("an NVIDIA driver is present but TensorFlow sees no GPU: install")
    assert problems[1].startswith("Horovod was built without NCCL") and "HOROVOD_GPU_OPERATIONS=NCCL" in problems[1]
    assert calibrate.gpu_check({"gpus": ["H200"], "horovod_nccl": True}, driver_present=True) == []
    assert calibrate.gpu_check(facts, driver_present=False) == []  # a CPU machine: nothing to check


def test_the_gpu_check_on_this_machine():
    result = python_module("hvd_dqn.plan.calibrate", ["--check_gpu"], timeout=120, check=False)
    if calibrate.nvidia_driver_present():
        pytest.skip("this machine has an NVIDIA driver; the check's answer depends on its set-up")
    assert result.returncode == 0 and "no NVIDIA driver on this machine; nothing to check" in result.stdout


def test_the_host_costs_are_a_line_through_the_env_counts():
    # 0.5 ms per call and 0.1 ms per env beyond the forward pass (0.2 ms) and emulators (1,000 steps/s).
    acting = {e: 0.2 + e + 0.5 + 0.1 * e for e in (1, 4, 16)}
    call, store = calibrate.host_costs(acting, {e: 0.2 for e in acting}, {e: 1000.0 for e in acting})
    assert (call, store) == pytest.approx((0.5, 0.1))
    # Noise that makes the cost fall with more envs is no cost per step.
    call, store = calibrate.host_costs({1: 1.8, 4: 4.5}, {1: 0.2, 4: 0.2}, {1: 1000.0, 4: 1000.0})
    assert store == 0.0 and call == pytest.approx((0.6 + 0.3) / 2)


@pytest.mark.parametrize("arguments, message", [
    (["--out=/tmp/p.json"], "--flagfile and --out are required (or --check_gpu alone)"),
    (["--flagfile=/nonexistent.flags", "--out=/tmp/p.json"], "--flagfile=/nonexistent.flags: no such file"),
    ([CARTPOLE, "--out=/nonexistent/folder/p.json"], "--out=/nonexistent/folder/p.json: its folder does not exist"),
    ([CARTPOLE, "--out=/tmp/p.json", "--rounds=0"], "--round_seconds, --rounds and --replay_rows must be positive"),
    ([CARTPOLE, "--out=/tmp/p.json", "--envs=0"], "--envs=0: must list distinct positive sizes, e.g. 1,4,16"),
    ([CARTPOLE, "--out=/tmp/p.json", "--batches=a"], "--batches=a: must list distinct positive sizes"),
])
def test_bad_arguments_are_one_line(arguments, message):
    result = python_module("hvd_dqn.plan.calibrate", arguments, timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().startswith(f"hvd_dqn.plan.calibrate: error: {message}"), result.stderr[-2000:]


@pytest.mark.parametrize("content, message", [
    ("not json", "cannot read it as JSON"),
    (None, "no such file, and not a built-in profile (h200-16core, gtx1080-2016)"),
    ("[1, 2]", "not a hardware profile"),
    ('{"version": 99}', "profile version 99; this hvd_dqn reads version 3"),
    ("NO_UPDATE_TIMED", "'update_timed' must be an object naming the agent whose update the profile timed"),
    ("NO_NETWORK", "'update_timed' must be an object naming the agent whose update the profile timed, its network"),
    ("NO_OBSERVATIONS", "'observation_shape' must list the positive sizes of the observations the parts were timed "
                        "on, e.g. [4, 84, 84], not None"),
    ("BROKEN_TABLE", "forward_ms['4'] = -1 must be a positive size and a positive finite number"),
    ("NO_EXCHANGE", "'exchange' must be an object"),
])
def test_a_bad_profile_is_one_line(tmp_path, content, message):
    path = tmp_path / "profile.json"
    data = hardware_profiles.H200_16CORE.to_json()
    if content == "BROKEN_TABLE":
        data["forward_ms"]["4"] = -1
        content = json.dumps(data)
    elif content == "NO_EXCHANGE":
        del data["exchange"]
        content = json.dumps(data)
    elif content == "NO_UPDATE_TIMED":
        del data["update_timed"]
        content = json.dumps(data)
    elif content == "NO_NETWORK":
        del data["update_timed"]["network"]
        content = json.dumps(data)
    elif content == "NO_OBSERVATIONS":
        del data["observation_shape"]
        content = json.dumps(data)
    if content is not None:
        path.write_text(content)
    result = python_module("hvd_dqn.plan.cost_model", [
        f"--flagfile={REPO / 'configs' / 'breakout_dopamine.flags'}", "--paper", f"--profile={path}"],
        timeout=300, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().startswith(f"hvd_dqn.plan.cost_model: error: --profile={path}: {message}"), \
        result.stderr[-2000:]
