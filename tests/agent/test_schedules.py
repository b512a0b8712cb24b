import pytest
import tensorflow as tf

from hvd_dqn.agent.optimizers import WarmupToScaledLearningRate
from hvd_dqn.agent.schedules import LinearSchedule
from hvd_dqn.rank_split import UpdateCountedSchedules, update_counted_schedules
from hvd_dqn.agent.configs import make_config


@pytest.mark.parametrize("step, expected", [(0, 1.0), (250, 0.7625), (500, 0.525), (1000, 0.05), (10**6, 0.05)])
def test_epsilon_falls_linearly_then_stays(step, expected):
    assert LinearSchedule(1.0, 0.05, 1000)(step) == pytest.approx(expected)


def test_schedule_with_no_duration_starts_at_the_end_value():
    assert LinearSchedule(1.0, 0.1, 0)(0) == pytest.approx(0.1)


@pytest.mark.parametrize("update, expected", [(0, 1e-3), (50, 2.5e-3), (100, 4e-3), (1000, 4e-3)])
def test_learning_rate_warms_up_to_the_scaled_value(update, expected):
    schedule = WarmupToScaledLearningRate(base=1e-3, scale=4, warmup_updates=100)
    assert float(schedule(tf.constant(update))) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("update, expected", [(0, 1e-3), (50, 5.5e-4), (100, 1e-4), (5000, 1e-4)])
def test_learning_rate_decays_linearly_to_its_end_value_then_stays(update, expected):
    schedule = WarmupToScaledLearningRate(1e-3, 1.0, 0, end_fraction=0.1, decay_updates=100)
    assert float(schedule(tf.constant(update))) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("update, expected", [(0, 1e-3), (10, 2e-3 * 0.91), (100, 2e-4), (300, 2e-4)])
def test_a_scaled_and_warmed_up_learning_rate_decays_by_the_same_factor(update, expected):
    schedule = WarmupToScaledLearningRate(1e-3, 2.0, 10, end_fraction=0.1, decay_updates=100)
    assert float(schedule(tf.constant(update))) == pytest.approx(expected, rel=1e-6)


def test_learning_rate_without_warmup_is_scaled_at_once():
    assert float(WarmupToScaledLearningRate(1e-3, 2, 0)(0)) == pytest.approx(2e-3)


def test_apex_epsilons_span_base_to_base_to_the_one_plus_alpha():
    from hvd_dqn.agent.schedules import apex_epsilons

    values = apex_epsilons(8, base=0.4, alpha=7.0)
    assert values[0] == pytest.approx(0.4)
    assert values[-1] == pytest.approx(0.4**8)
    assert values[3] == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert list(values) == sorted(values, reverse=True)
    assert apex_epsilons(1).tolist() == [0.4]


@pytest.mark.parametrize("step, expected", [(0, 1.0), (19_999, 1.0), (20_000, 1.0), (145_000, 0.505),
                                            (270_000, 0.01), (10**6, 0.01)])
def test_epsilon_waits_for_the_delay_then_falls_as_dopamine_does(step, expected):
    # Dopamine's linearly_decaying_epsilon(250_000, step, 20_000, 0.01): 1.0 until 20k, 0.01 from 270k.
    assert LinearSchedule(1.0, 0.01, 250_000, delay=20_000)(step) == pytest.approx(expected)


def test_a_delayed_schedule_with_no_duration_jumps_at_the_delay():
    schedule = LinearSchedule(1.0, 0.1, 0, delay=5)
    assert (schedule(4), schedule(5)) == (1.0, 0.1)


@pytest.mark.parametrize("ranks, rule, expected", [(4, "linear", 4.0), (4, "sqrt", 2.0), (1, "sqrt", 1.0)])
def test_learning_rate_scale_rules(ranks, rule, expected):
    from hvd_dqn.rank_split import learning_rate_scale

    assert learning_rate_scale(ranks, rule) == pytest.approx(expected)
    with pytest.raises(ValueError, match="unknown learning-rate scale rule"):
        learning_rate_scale(2, "cube")


@pytest.mark.parametrize("ranks, expected", [(1, (250, 1, 25000)), (2, (125, 1, 12500)), (4, (63, 1, 6250)),
                                             (8, (31, 1, 3125)), (1000, (1, 1, 25))])
def test_scaled_schedules_span_one_ranks_env_steps_under_batch_scaling(ranks, expected):
    """--scale_schedules_by_workers: N ranks of --rank_scaling=batch make N times fewer updates per env step, so
    the schedules counted in updates are divided by N (rounded half up, never below 1: 62.5 -> 63)."""
    config = make_config(rank_scaling="batch", scale_schedules_by_workers=True, target_update_period=250,
                         lr_warmup_updates=1, lr_decay_updates=25000)
    assert update_counted_schedules(config, ranks) == UpdateCountedSchedules(*expected)


def test_schedules_stay_as_given_without_the_flag_or_a_warmup():
    config = make_config(rank_scaling="batch", scale_schedules_by_workers=False, target_update_period=250,
                         lr_decay_updates=25000)
    assert update_counted_schedules(config, 4) == UpdateCountedSchedules(250, 0, 25000)
    scaled = make_config(rank_scaling="batch", scale_schedules_by_workers=True, target_update_period=250)
    assert update_counted_schedules(scaled, 4).lr_warmup_updates == 0  # no warm-up stays none
