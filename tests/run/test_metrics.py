"""The metrics an agent's updates report beyond the TD loss and Q (a distributional agent's return_std): averaged
over the updates between log points like them, and written in a metrics.csv column of their own after q_mean,
while an agent without any keeps the columns it always had. One rank: the collectives are the identity here."""
import csv
import math

import numpy as np
import pytest

from hvd_dqn import collectives
from hvd_dqn.run.metrics import CSV_COLUMNS, MetricsWriter, RankMetrics


@pytest.fixture
def one_rank(monkeypatch):
    monkeypatch.setattr(collectives, "sum_over_ranks", lambda values, name: np.asarray(values, np.float64))
    monkeypatch.setattr(collectives, "gather_objects", lambda value, name: [value])


def test_an_agents_own_update_metrics_are_averaged_over_the_updates_since_the_last_log_point(one_rank):
    rank_metrics = RankMetrics(update_metrics=("return_std",))
    window, _ = rank_metrics.reduce()
    assert math.isnan(window["return_std"]) and math.isnan(window["td_loss"])  # no update yet: no value
    rank_metrics.record_update({"td_loss": 0.5, "q_mean": 1.0, "return_std": 1.0})
    rank_metrics.record_update({"td_loss": 1.5, "q_mean": 3.0, "return_std": 4.0})
    window, _ = rank_metrics.reduce()
    assert (window["td_loss"], window["q_mean"], window["return_std"]) == (1.0, 2.0, 2.5)
    rank_metrics.record_update({"td_loss": 0.0, "q_mean": 0.0, "return_std": 7.0})
    assert rank_metrics.reduce()[0]["return_std"] == 7.0  # each log point starts afresh


def _written(logdir, update_metrics, row_metrics):
    writer = MetricsWriter(str(logdir), total_env_steps=100, start_env_steps=0, frames_per_step=1,
                           update_metrics=update_metrics)
    writer.write(dict(env_steps=10, updates=2, episodes=1, episode_return_mean=1.0, episode_length_mean=10.0,
                      episodes_in_window=1, td_loss=0.25, q_mean=0.5, epsilon=0.1, learning_rate=1e-3,
                      wall_time_s=1.0, **row_metrics))
    writer.close()
    with open(logdir / "metrics.csv", newline="") as handle:
        return list(csv.reader(handle))


def test_the_csv_has_a_column_for_each_of_the_agents_own_metrics_after_q_mean(tmp_path):
    header, row = _written(tmp_path, ("return_std",), {"return_std": 3.25})
    at = CSV_COLUMNS.index("q_mean") + 1
    assert header == [*CSV_COLUMNS[:at], "return_std", *CSV_COLUMNS[at:]]
    assert row[header.index("return_std")] == "3.25" and row[header.index("td_loss")] == "0.25"


def test_an_agent_without_its_own_metrics_keeps_the_columns_it_always_had(tmp_path):
    header, _ = _written(tmp_path, (), {})
    assert tuple(header) == CSV_COLUMNS
