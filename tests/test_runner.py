"""The Python entry point (`hvd_dqn.runner.Runner`): train, resume and evaluate from a script, as a user would,
on the same trainer and agent factory as the command line."""
import json
import textwrap

import pytest

from conftest import PYTHON, run
from hvd_dqn.config import ConfigError

SCRIPT = textwrap.dedent("""
    import json, sys
    from hvd_dqn.runner import Runner

    runner = Runner.from_flagfile("configs/cartpole.flags", logdir=sys.argv[1], total_env_steps=3000,
                                  eval_interval_env_steps=0, checkpoint_interval_env_steps=0)
    first = runner.train()
    resumed = runner.resume(total_env_steps=5000)
    scores = runner.evaluate(episodes=3, greedy_actions=True)
    print("RESULT " + json.dumps({"first": first.__dict__, "resumed": resumed.__dict__, "scores": scores}))
""")


def test_a_script_trains_resumes_and_evaluates(tmp_path):
    logdir = tmp_path / "run"
    output = run([PYTHON, "-c", SCRIPT, str(logdir)], timeout=300).stdout
    result = json.loads(output.split("RESULT ", 1)[1])
    first, resumed, scores = result["first"], result["resumed"], result["scores"]
    # The preset's 8 envs and --train_frequency=2: updates from 1,000 env steps on, 4 per 8 env steps.
    assert (first["env_steps"], first["updates"], first["logdir"]) == (3000, 1004, str(logdir))
    # Resumed without its replay memory (no --checkpoint_replay), it refills 1,000 transitions before updating.
    assert (resumed["env_steps"], resumed["updates"]) == (5000, 1004 + 4 + (5000 - 4000) // 2)
    assert resumed["episodes"] > first["episodes"] > 0 and resumed["wall_s"] > first["wall_s"]
    assert scores["episodes"] == 3 and scores["env_steps"] == 5000 and len(scores["returns"]) == 3
    assert scores["greedy_actions"]["states"] == round(scores["mean_length"] * 3)  # CartPole's actions by index
    assert sorted(scores["greedy_actions"]["greedy_action_shares"]) == ["0", "1"]
    header = (logdir / "metrics.csv").read_text().splitlines()[0]
    assert header.startswith("env_steps,")  # the command line's log, written by the same trainer


def test_a_bad_setting_is_named():
    from hvd_dqn.runner import Runner

    with pytest.raises(ConfigError, match=r"^--batch_sise: not a setting of hvd_dqn.train"):
        Runner(batch_sise=32)
    with pytest.raises(ConfigError, match=r"^--batch_size=0: must be a positive integer"):
        Runner.from_flagfile("configs/cartpole.flags", batch_size=0)


def test_a_flagfile_is_validated_once_and_again_only_for_keyword_settings(monkeypatch):
    from hvd_dqn import runner as runner_module
    from hvd_dqn.agent import configs
    from hvd_dqn.runner import Runner

    calls = []

    def counted(config, *args, **kwargs):
        calls.append(config)
        return validate(config, *args, **kwargs)

    validate = configs.validate
    monkeypatch.setattr(configs, "validate", counted)  # the flags module imports it when it builds a config
    monkeypatch.setattr(runner_module, "validate", counted)
    plain = Runner.from_flagfile("configs/cartpole_qrdqn.flags")
    assert len(calls) == 1 and plain.config.agent == "qrdqn"
    changed = Runner.from_flagfile("configs/cartpole_qrdqn.flags", batch_size=64)
    assert len(calls) == 3 and changed.config.batch_size == 64 and calls[-1] is not calls[-2]
    # The flagfile's settings are still "given": another agent's setting is refused at its default value.
    with pytest.raises(ConfigError, match=r"^--num_atoms"):
        plain.train(num_atoms=51)
