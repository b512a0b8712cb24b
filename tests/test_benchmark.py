"""The benchmark command runs each stage and reports every figure it promises, side by side."""
import json

from conftest import REPO, python_module

KEYS = ("env_raw_steps_per_s", "actor_steps_per_s", "learner_updates_per_s", "plain_tf_updates_per_s",
        "replay_sample_batches_per_s", "bare_gather_batches_per_s")


def test_benchmark_measures_every_stage_and_writes_json(tmp_path):
    report = tmp_path / "bench.json"
    result = python_module("hvd_dqn.benchmark", [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                                                 "--replay_capacity=2000", "--learning_starts=1000",
                                                 "--round_seconds=0.3", "--rounds=2", f"--json={report}"], timeout=300)
    results = json.loads(report.read_text())
    for key in KEYS:
        assert results[key] > 0, key
        assert key in result.stdout  # the printed table
    assert results["learner_vs_plain_tf"] == results["learner_updates_per_s"] / results["plain_tf_updates_per_s"]
    # Two float32 observations of 4 values, a uint8 action, float32 reward and discount, two flags.
    assert results["replay_bytes_per_transition"] == 2 * 4 * 4 + 1 + 4 + 4 + 2
    assert results["cores"] >= 1 and results["rounds"] == 2


def test_benchmark_names_a_bad_setting(tmp_path):
    result = python_module("hvd_dqn.benchmark", ["--rounds=0"], timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "hvd_dqn.benchmark: error: --round_seconds and --rounds must be positive"
