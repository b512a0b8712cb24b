"""update_costs times several presets' updates side by side and names a preset it cannot time."""
import json

import pytest

from conftest import REPO, python_module

CONFIGS = REPO / "configs"


def test_each_presets_update_is_timed_beside_the_others_with_the_run_flags_applied(tmp_path):
    report = tmp_path / "costs.json"
    presets = ["cartpole.flags", "cartpole_qrdqn.flags", "cartpole_iqn.flags", "cartpole_c51.flags"]
    result = python_module("hvd_dqn.measure.update_costs", [*[CONFIGS / name for name in presets],
                                                            "--round_seconds=0.2", "--rounds=2", f"--json={report}",
                                                            "--", "--batch_size=16"], timeout=300)
    written = json.loads(report.read_text())
    assert written["rounds"] == 2 and written["run_flags"] == ["--batch_size=16"]
    rows = written["presets"]
    assert list(rows) == ["cartpole", "cartpole_qrdqn", "cartpole_iqn", "cartpole_c51"]
    assert [row["agent"] for row in rows.values()] == ["DQN", "QR-DQN", "IQN", "C51"]
    first = rows["cartpole"]["updates_per_s"]
    for name, row in rows.items():
        assert row["batch_size"] == 16, name  # the flags after "--" reach every preset
        assert row["updates_per_s"] > 0 and row["ms_per_update"] == pytest.approx(1000 / row["updates_per_s"])
        assert row["cost_vs_first"] == pytest.approx(first / row["updates_per_s"])
        assert row["learner_agent_steps_per_s"] == pytest.approx(row["updates_per_s"] * row["train_frequency"])
        assert f"  {name} " in result.stdout  # the printed table names every preset
    assert rows["cartpole"]["cost_vs_first"] == 1.0


@pytest.mark.parametrize("arguments, message", [
    (["configs/no_such.flags"], "configs/no_such.flags: no such preset file"),
    (["configs/cartpole.flags", "configs/cartpole_pqn.flags"],
     "configs/cartpole_pqn.flags: PQN learns from rollouts, not a replay memory"),
    (["configs/cartpole.flags", "--", "--batch_size=0"], "configs/cartpole.flags: "),
    (["configs/cartpole.flags", "configs/cartpole.flags"], "two presets share a name"),
    (["configs/cartpole.flags", "--rounds=0"], "--round_seconds and --rounds must be positive"),
    (["configs/cartpole.flags", "--json=no/such/folder/costs.json"], "its folder does not exist"),
], ids=["missing", "pqn", "bad-run-flag", "same-name", "no-rounds", "json-folder"])
def test_a_preset_it_cannot_time_is_named_in_one_line(arguments, message):
    result = python_module("hvd_dqn.measure.update_costs", arguments, timeout=120, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("python -m hvd_dqn.measure.update_costs: error: ") and message in lines[0], lines[0]
