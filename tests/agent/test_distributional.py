"""QR-DQN, IQN and C51 (as full Rainbow) end to end under horovodrun: 2 ranks keep one model, a run stopped at a checkpoint and resumed
(with its replay memories) is the run that never stopped, and evaluate and export act on the mean of the learnt
distribution."""
import csv
import json

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent import reload
from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, REPO, assert_two_ranks_resume_exactly, horovodrun, python_module

# Short CartPole runs of each agent's preset: enough updates and checkpoints to exercise every phase, not to learn.
COMMON = ["--num_envs=4", "--learning_starts=400", "--batch_size=32", "--replay_capacity=4000", "--hidden_sizes=32,32",
          "--eval_interval_env_steps=0", "--stop_at_train_return=inf", "--log_interval_env_steps=500",
          "--checkpoint_interval_env_steps=1000", "--checkpoint_replay",
          "--priority_beta_start=0.5", "--priority_beta_end=0.5"]  # a fixed exponent: the halves equal the whole
AGENTS = {
    "qrdqn": [f"--flagfile={REPO / 'configs' / 'cartpole_qrdqn.flags'}", *COMMON, "--num_quantiles=8"],
    # IQN under mixed precision: the loss scale and the float16 network's quantiles resume exactly too.
    "iqn": [f"--flagfile={REPO / 'configs' / 'cartpole_iqn.flags'}", *COMMON, "--num_tau_samples=8",
            "--num_tau_prime_samples=8", "--num_quantile_samples=4", "--quantile_embedding_dim=16",
            "--mixed_precision"],
    # C51 as Hessel et al.'s full Rainbow: noisy networks (their noise repeated across the resume), dueling, double.
    "rainbow": [f"--flagfile={REPO / 'configs' / 'cartpole_c51.flags'}", *COMMON, "--num_atoms=11", "--noisy_nets",
                "--dueling", "--double_dqn"],
}


def _train(run, logdir, *flags):
    horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *run, f"--logdir={logdir}", *flags], timeout=600)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_two_ranks_train_one_model_resume_exactly_evaluate_and_export(tmp_path, agent):
    """2 ranks: the replicas' weights are equal at every checkpoint and moved; a run stopped at 1,000 env steps
    and resumed from its checkpoint plays the episodes and ends with the weights of the run that never stopped;
    evaluate and export give one value per action, the export's equal to the reloaded network's."""
    run = AGENTS[agent]
    whole = assert_two_ranks_resume_exactly(lambda logdir, *flags: _train(run, logdir, *flags), tmp_path)
    # The spread of the learnt return distributions is logged beside the TD loss once updates begin (1,000 env
    # steps in, each log point has updated): a positive standard deviation, in a column of its own after q_mean.
    with open(whole / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[list(rows[0]).index("q_mean") + 1] == "return_std"
    spreads = [float(row["return_std"]) for row in rows if int(row["env_steps"]) >= 1000]
    assert len(spreads) == 3 and all(0.0 < spread < 1000.0 for spread in spreads), spreads

    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={whole}", "--episodes=4", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["episodes"] == 4
    out = tmp_path / "policy"
    python_module("hvd_dqn.export", [f"--logdir={whole}", f"--out={out}"], timeout=300)
    serve = tf.saved_model.load(str(out)).signatures["serving_default"]
    _, env, q_network = reload.load_online_network(checkpoint.latest_checkpoint(str(whole)))
    env.close()
    observation = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    served = serve(observation=tf.constant(observation))
    np.testing.assert_allclose(served["q_values"].numpy(), q_network(observation).numpy(), rtol=1e-5, atol=1e-5)
    assert served["q_values"].shape == (64, 2)  # one value per action: the distribution's mean
    _assert_the_distribution_is_served(out, agent, observation, served["q_values"].numpy())


# Loads an export as a serving process would, in a process of its own without hvd_dqn: the distribution signature
# and the policy file, read as they are written.
SERVE_DISTRIBUTION = """
import json, sys
import numpy as np
import tensorflow as tf
folder = sys.argv[1]
observation = np.load(sys.argv[2])
served = tf.saved_model.load(folder).signatures["distribution"](observation=tf.constant(observation))
np.savez(sys.argv[3], **{name: value.numpy() for name, value in served.items()})
"""


def _assert_the_distribution_is_served(out, agent, observation, q_values):
    """The export's `distribution` signature, in a fresh process: the greedy actions and Q-values of
    `serving_default`, and the distribution whose mean they are (quantiles at their levels, or the atoms'
    probabilities over the support the policy file lists); the policy file names the agent and its settings."""
    import subprocess

    info = json.loads((out / "hvd_dqn_policy.json").read_text())
    inputs, outputs = out.parent / "observation.npy", out.parent / "served.npz"
    np.save(inputs, observation)
    subprocess.run([PYTHON, "-c", SERVE_DISTRIBUTION, str(out), str(inputs), str(outputs)], check=True, timeout=300,
                   env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"})
    served = dict(np.load(outputs))
    np.testing.assert_allclose(served["q_values"], q_values, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(served["actions"], q_values.argmax(axis=1))
    signature = info["signatures"]["distribution"]
    expected_agent = {"qrdqn": "qrdqn", "iqn": "iqn", "rainbow": "c51"}[agent]
    assert info["agent"] == expected_agent and info["signatures"]["serving_default"]["outputs"]["actions"]
    if expected_agent == "c51":
        probabilities, support = served["probabilities"], np.asarray(signature["points"]["support"])
        assert probabilities.shape == (64, 2, 11) and info["agent_settings"]["num_atoms"] == 11
        assert info["agent_settings"]["noisy_nets"] is True and info["agent_settings"]["dueling"] is True
        np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-5)
        np.testing.assert_allclose((probabilities * support).sum(axis=-1), q_values, rtol=1e-4, atol=1e-4)
        assert support[0] == -support[-1] == -info["agent_settings"]["v_max"]
    else:
        quantiles, levels = served["quantiles"], np.asarray(signature["points"]["levels"])
        count = {"qrdqn": 8, "iqn": 4}[agent]  # --num_quantiles, or IQN's --num_quantile_samples greedy levels
        assert quantiles.shape == (64, 2, count) and len(levels) == count
        np.testing.assert_allclose(levels, (2 * np.arange(count) + 1) / (2 * count))
        np.testing.assert_allclose(quantiles.mean(axis=-1), q_values, rtol=1e-5, atol=1e-5)
        setting = {"qrdqn": "num_quantiles", "iqn": "num_quantile_samples"}[agent]
        assert info["agent_settings"][setting] == count
