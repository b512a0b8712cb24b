"""hvd_dqn.plan.step_headroom: the one-rank flags that stand for k ranks of --rank_scaling=batch, the reading of
its table, its refusals, and its report recomputed from the evidence kept in results/scaling/."""
import json
import shutil

import pytest

from hvd_dqn.flags import config_of_runs
from hvd_dqn.rank_split import scales_lr, update_counted_schedules
from hvd_dqn.plan import step_headroom

from conftest import REPO

CARTPOLE = str(REPO / "configs" / "cartpole.flags")


def test_flags_for_k_are_what_k_ranks_of_the_default_get():
    config = config_of_runs("test", CARTPOLE, [])
    assert step_headroom.headroom_flags(config, 1) == []
    assert step_headroom.headroom_flags(config, 4) == [
        "--train_frequency=8", "--target_update_period=63", "--lr_decay_updates=6250", "--learning_rate=0.004",
        "--learning_rate_end=0.0004"]
    # The same schedules and step-size factor the trainer gives 16 ranks of the preset.
    schedules = update_counted_schedules(config, 16)
    assert scales_lr(config)
    flags = dict(flag[2:].split("=") for flag in step_headroom.headroom_flags(config, 16))
    assert int(flags["target_update_period"]) == schedules.target_update_period == 16
    assert int(flags["lr_decay_updates"]) == schedules.lr_decay_updates == 1563
    assert float(flags["learning_rate"]) == pytest.approx(16 * config.learning_rate)
    assert int(flags["train_frequency"]) == 16 * config.train_frequency
    # The square-root rule scales the step size by sqrt(k); MinAtar has no decay and no end rate to scale.
    sqrt = config_of_runs("test", CARTPOLE, ["--lr_scale_rule=sqrt"])
    assert "--learning_rate=0.004" in step_headroom.headroom_flags(sqrt, 16)
    minatar = config_of_runs("test", str(REPO / "configs" / "minatar.flags"), [])
    assert step_headroom.headroom_flags(minatar, 8) == ["--train_frequency=8", "--target_update_period=125",
                                                        "--learning_rate=0.002"]


def test_first_k_past_a_ratio():
    rows = [dict(k=1, ratio=1.0), dict(k=4, ratio=1.1), dict(k=8, ratio=1.3), dict(k=16, ratio=None)]
    assert step_headroom.first_k_past(rows, 1.25) == 8
    assert step_headroom.first_k_past(rows, 1.5) == 16  # unsolved counts as beyond
    assert step_headroom.first_k_past(rows[:2], 1.25) is None


def test_refusals_are_one_line(tmp_path, capsys):
    common = ["--target=475", "--budget_env_steps=1000", f"--workdir={tmp_path}", f"--out={tmp_path / 'o'}"]
    assert step_headroom.main([f"--flagfile={CARTPOLE}", "--k=4,8", *common]) == 2
    assert "must start with 1" in capsys.readouterr().err
    assert step_headroom.main([f"--flagfile={REPO / 'configs' / 'cartpole_pqn.flags'}", "--k=1,4", *common]) == 2
    assert "--agent=pqn" in capsys.readouterr().err


def test_cartpole_report_recomputes_from_the_kept_evidence(tmp_path, capsys):
    kept = REPO / "results" / "scaling"
    for k in (1, 4, 8, 16, 32):
        shutil.copytree(kept / f"cartpole_headroom_k{k}_runs", tmp_path / f"cartpole_headroom_k{k}_runs")
    assert step_headroom.main([
        f"--flagfile={CARTPOLE}", "--k=1,4,8,16,32", "--seeds=0,1,2", "--target=475", "--budget_env_steps=100000",
        f"--workdir={tmp_path / 'runs'}", f"--out={tmp_path / 'cartpole_headroom'}", "--report_only"]) == 0
    report = json.loads((tmp_path / "cartpole_headroom.json").read_text())
    committed = json.loads((kept / "cartpole_headroom.json").read_text())
    assert report["rows"] == committed["rows"] and report["first_k_past"] == committed["first_k_past"]
    assert "First past 1.25x" in capsys.readouterr().out
