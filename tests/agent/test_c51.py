"""C51 (--agent=c51): the categorical projection and the cross-entropy against values worked by hand, its targets
and greedy policy on networks whose outputs are set, its one-line errors, and the agent's CartPole preset learning
(2 ranks in step, exact resume, evaluate and export with noisy nets: tests/agent/test_distributional.py)."""

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.c51.agent import C51Agent
from hvd_dqn.agent.c51.learner import CategoricalLearner, categorical_support, project_distribution, support_of
from hvd_dqn.agent.networks import Head, build_mlp_q_network
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.configs import make_config

from conftest import REPO, assert_greedy_view_exports, train_error_line, train_and_check_learning

PRESET = f"--flagfile={REPO / 'configs' / 'cartpole_c51.flags'}"
SUPPORT = categorical_support(5, -2.0, 2.0)  # atoms -2, -1, 0, 1, 2


def test_the_support_is_evenly_spaced_and_v_min_defaults_to_minus_v_max():
    np.testing.assert_allclose(SUPPORT, [-2.0, -1.0, 0.0, 1.0, 2.0])
    np.testing.assert_allclose(support_of(make_config(agent="c51", num_atoms=3, v_max=4.0)), [-4.0, 0.0, 4.0])
    np.testing.assert_allclose(support_of(make_config(agent="c51", num_atoms=3, v_min=0.0, v_max=4.0)),
                               [0.0, 2.0, 4.0])


@pytest.mark.parametrize("values, probabilities, expected", [
    # On atoms: nothing moves.
    ([-2.0, 0.0, 1.0], [0.2, 0.3, 0.5], [0.2, 0.0, 0.3, 0.5, 0.0]),
    # 0.25 is a quarter of the way from atom 0 to atom 1: 3/4 of its 0.4 to 0, 1/4 to 1; -1.5 halves its 0.6.
    ([0.25, -1.5], [0.4, 0.6], [0.3, 0.3, 0.3, 0.1, 0.0]),
    # Beyond the support: clipped to its ends (3.7 -> 2, -9 -> -2).
    ([3.7, -9.0, 1.5], [0.5, 0.25, 0.25], [0.25, 0.0, 0.0, 0.125, 0.625]),
    # A terminal transition's target: every atom moved to the reward, r = 0.6 -> 0.4 at atom 0, 0.6 at atom 1.
    ([0.6] * 5, [0.1, 0.2, 0.3, 0.2, 0.2], [0.0, 0.0, 0.4, 0.6, 0.0]),
], ids=["on-atoms", "between-atoms", "clipped", "terminal"])
def test_the_projection_against_values_worked_by_hand(values, probabilities, expected):
    projected = project_distribution(tf.constant([values], tf.float32), tf.constant([probabilities], tf.float32),
                                     SUPPORT).numpy()
    np.testing.assert_allclose(projected, [expected], atol=1e-6)
    assert projected.sum() == pytest.approx(1.0, abs=1e-6)  # a projection keeps the probability


def test_the_projection_equals_equation_7_term_by_term():
    """The projection adds each value to its two neighbouring atoms; equation 7 as written weighs every atom by
    [1 - |clip(value) - z_i| / spacing] clipped to [0, 1]. On 201 atoms, values beyond the support, between atoms and
    on them, the two agree."""
    support = categorical_support(201, -100.0, 100.0)
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.uniform(-130, 130, (16, 150)), np.round(rng.uniform(-100, 100, (16, 51)))], axis=1)
    probabilities = rng.dirichlet(np.ones(201), size=16)
    clipped = np.clip(values, -100.0, 100.0)
    weights = np.clip(1.0 - np.abs(clipped[:, None, :] - support[None, :, None]) / 1.0, 0.0, 1.0)
    expected = (weights * probabilities[:, None, :]).sum(axis=-1)
    projected = project_distribution(tf.constant(values, tf.float32), tf.constant(probabilities, tf.float32),
                                     support).numpy()
    np.testing.assert_allclose(projected, expected, atol=1e-5)


def _constant_network(logits_per_action, name, support=SUPPORT):
    """A C51 network whose logits are `logits_per_action` (actions, atoms) whatever the observation."""
    actions, atoms = np.shape(logits_per_action)
    network = build_mlp_q_network((2,), actions, (4,), name, head=Head(atoms=atoms))
    weights = [np.zeros_like(weight) for weight in network.get_weights()]
    weights[-1] = np.asarray(logits_per_action, np.float32).ravel()
    network.set_weights(weights)
    network.support = support
    return network


BIG = 30.0  # softmax(BIG at one atom, 0 elsewhere) is that atom's with probability 1 - 1e-12


@pytest.mark.parametrize("double_dqn", [False, True])
def test_targets_move_the_greedy_actions_distribution_and_project_it(double_dqn):
    """The target network puts action 0 at atom -2 (Q = -2) and action 1 at atom 1 (Q = 1): the target takes
    action 1's distribution. With double DQN the online network chooses: its logits favour action 0.
    Transition 1: r = 0.5, discount 0.5: atom 1 -> 1.0, on an atom. Transition 2 is terminal (discount 0): all at
    r = -0.5, halfway between atoms -1 and 0."""
    target = _constant_network([[BIG, 0, 0, 0, 0], [0, 0, 0, BIG, 0]], "target")
    online = _constant_network([[0, 0, 0, 0, BIG], [BIG, 0, 0, 0, 0]], "online")
    target_weights = target.get_weights()
    learner = CategoricalLearner(online, target, make_optimizer(make_config(), 1, distributed=False),
                                 double_dqn=double_dqn, support=SUPPORT)
    target.set_weights(target_weights)  # the learner copied online into target at start: put the target's back
    targets = learner._targets(tf.constant([0.5, -0.5]), tf.constant([0.5, 0.0]), tf.zeros((2, 2))).numpy()
    # Double DQN: action 0's atom -2 moves to 0.5 + 0.5 * -2 = -0.5, halfway between atoms -1 and 0.
    first = [0.0, 0.5, 0.5, 0.0, 0.0] if double_dqn else [0.0, 0.0, 0.0, 1.0, 0.0]
    np.testing.assert_allclose(targets, [first, [0.0, 0.5, 0.5, 0.0, 0.0]], atol=1e-6)


def test_the_loss_is_the_cross_entropy_of_the_action_taken_against_its_target():
    """Uniform logits over 5 atoms against a target at one atom: cross-entropy log 5; against the target (1/2, 1/2)
    on two atoms where the prediction puts (e^1, e^1, 1, 1, 1) / (2e + 3): -log(e / (2e + 3))."""
    network = _constant_network([[0, 0, 0, 0, 0], [1, 1, 0, 0, 0]], "online")
    learner = CategoricalLearner(network, _constant_network([[0] * 5] * 2, "target"),
                                 make_optimizer(make_config(), 1, distributed=False), double_dqn=False,
                                 support=SUPPORT)
    targets = tf.constant([[0, 0, 1, 0, 0], [0.5, 0.5, 0, 0, 0]], tf.float32)
    mean, q_taken, per_transition, per_transition_metrics = learner._loss(
        tf.zeros((2, 2)), tf.constant([0, 1]), targets, tf.constant([1.0, 0.5]))
    e = np.e
    expected = [np.log(5.0), -np.log(e / (2 * e + 3))]
    np.testing.assert_allclose(per_transition.numpy(), expected, rtol=1e-5)
    assert float(mean) == pytest.approx((expected[0] + 0.5 * expected[1]) / 2, rel=1e-5)  # importance-weighted
    np.testing.assert_allclose(q_taken.numpy(), [0.0, (-2 * e - e + 0 + 1 + 2) / (2 * e + 3)], atol=1e-6)
    # The spread of each taken action's return: uniform on -2..2 has variance (4 + 1 + 0 + 1 + 4) / 5 = 2; the
    # second distribution's variance is E[z^2] - Q^2 with E[z^2] = (4e + e + 0 + 1 + 4) / (2e + 3).
    second_q = (-3 * e + 3) / (2 * e + 3)
    np.testing.assert_allclose(per_transition_metrics["return_std"].numpy(),
                               [np.sqrt(2.0), np.sqrt((5 * e + 5) / (2 * e + 3) - second_q ** 2)], rtol=1e-5)


def test_the_greedy_policy_acts_on_the_expected_return_and_exports_so(tmp_path):
    """Action 0 has the likelier top atom but the lower mean: at -2 or 2 with probabilities 0.6 / 0.4 (Q = -0.4);
    action 1 at 0 for sure (Q = 0). The policy takes action 1."""
    network = _constant_network([[np.log(0.6), -BIG, -BIG, -BIG, np.log(0.4)], [-BIG, -BIG, 0, -BIG, -BIG]], "online")
    q_network = C51Agent.q_values(network)
    observation = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_allclose(q_network(observation).numpy(), [[-0.4, 0.0]] * 3, atol=1e-5)
    assert_greedy_view_exports(q_network, network, observation, [1, 1, 1], tmp_path / "policy")


@pytest.mark.parametrize("flags, message", [
    (["--num_atoms=1"], "--num_atoms=1: must be an integer >= 2"),
    (["--v_max=-100"], "--v_max=-100.0 with --v_min unset (so -v_max = 100.0): v_max must be above v_min"),
    (["--v_min=5", "--v_max=5"], "--v_max=5.0 with --v_min=5.0: v_max must be above v_min"),
    (["--noisy_nets", "--noisy_sigma0=0"], "--noisy_sigma0=0.0: must be a number > 0"),
    (["--noisy_nets", "--apex_exploration"], "--noisy_nets with --apex_exploration: noisy networks explore by "
                                             "their noise"),
    (["--kappa=2"], "--kappa=2.0: a setting of QR-DQN and IQN (the quantile Huber loss); --agent=c51 learns a "
                    "categorical distribution of the return on fixed atoms. Leave it out, or use --agent=qrdqn"),
    (["--agent=iqn"], "--num_atoms=201: a setting of C51 (the return's categorical distribution); --agent=iqn"),
], ids=["one-atom", "v-max-below-minus-v-max", "empty-support", "sigma0-0", "noisy-apex", "qrdqn-setting",
        "setting-for-iqn"])
def test_a_bad_setting_is_one_line(tmp_path, flags, message):
    line = train_error_line([PRESET, f"--logdir={tmp_path / 'run'}", *flags])
    assert line.startswith(f"hvd_dqn.train: error: {message}"), line


@pytest.mark.parametrize("agent, owners", [("pqn", "DQN, QR-DQN, C51 and M-DQN"), ("iqn", "DQN, QR-DQN, C51 and M-DQN")])
def test_noisy_nets_are_refused_by_the_agents_whose_networks_have_none(tmp_path, agent, owners):
    line = train_error_line([f"--agent={agent}", "--noisy_nets", f"--logdir={tmp_path / 'run'}"])
    assert line.startswith(f"hvd_dqn.train: error: --noisy_nets=true: a setting of {owners} (the Q-network's "
                           f"fully connected layers); --agent={agent}"), line


def test_cartpole_c51_preset_learns(tmp_path):
    """The preset, seed 0, for 20,000 env steps: its last 100 training episodes, as played, average at least 120
    (random play: 22; conftest.LEARNS_ENV_STEPS says where its runs in results/cartpole_c51/ stand then, and
    that folder holds the runs that solve CartPole, 475, within the preset's budget)."""
    train_and_check_learning(REPO / "configs" / "cartpole_c51.flags", tmp_path / "run")
