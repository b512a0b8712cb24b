"""Training metrics: accumulated on every rank, summed over ranks at each log point, written by rank 0.

Rank 0 writes each row three ways: a progress line on the console, TensorBoard scalars under namespaced
tags (`charts/...`, `losses/...`, as CleanRL names them) and a row of <logdir>/metrics.csv. Every finished
training episode of every rank also becomes a row of <logdir>/episodes.csv (env steps and frames at its end,
rank, env, raw return, length, and `wall_s`: the seconds of training when it ended, continued across resumes),
from which hvd_dqn.reports.curves draws curves with a band over ranks and time to a score is read.
On resume both CSVs are appended to, not replaced; rows a crashed run logged after the checkpoint it resumes
from are first moved to a side file (`set_aside_rows_after`), since the resumed run plays those env steps again.
"""
from __future__ import annotations

import csv
import datetime
import math
import os
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
from absl import logging

from hvd_dqn import collectives
from hvd_dqn.rank_split import (rank_count_caution, scales_schedules, unscaled_schedules_warning,
                                update_counted_schedules)

CSV_COLUMNS = (
    "env_steps", "env_frames", "updates", "episodes", "episode_return_mean", "episode_length_mean",
    "episodes_in_window", "td_loss", "q_mean", "epsilon", "learning_rate", "env_steps_per_second", "eval_return_mean",
    "wall_time_s",
)

EPISODE_CSV_COLUMNS = ("env_steps", "env_frames", "rank", "env", "return", "length", "wall_s")

# CSV column -> TensorBoard tag.
TENSORBOARD_TAGS = {
    "episode_return_mean": "charts/episode_return",
    "episode_length_mean": "charts/episode_length",
    "env_steps_per_second": "charts/env_steps_per_second",
    "epsilon": "charts/epsilon",
    "learning_rate": "charts/learning_rate",
    "eval_return_mean": "charts/eval_return",
    "td_loss": "losses/td_loss",
    "q_mean": "losses/q_values",
}


class EpisodeTracker:
    """Return and length of the episode running in each of a rank's envs."""

    def __init__(self, num_envs: int):
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)

    def step(self, rewards: np.ndarray, done: np.ndarray):
        """Adds one step's rewards; returns (envs, returns, lengths) of the episodes that just ended."""
        self._returns += rewards
        self._lengths += 1
        finished = np.flatnonzero(done), self._returns[done], self._lengths[done]
        self._returns[done] = 0.0
        self._lengths[done] = 0
        return finished

    def state(self) -> Dict[str, np.ndarray]:
        return {"episode_returns": self._returns.copy(), "episode_lengths": self._lengths.copy()}

    def load_state(self, state: Dict[str, np.ndarray]) -> None:
        if state["episode_returns"].shape != self._returns.shape:
            raise ValueError(f"the saved episode returns are of {len(state['episode_returns'])} envs, not "
                             f"{len(self._returns)}")
        self._returns[...] = state["episode_returns"]
        self._lengths[...] = state["episode_lengths"]


class RankMetrics:
    """This rank's episodes and update statistics since the last log point; `reduce` combines them over all
    ranks and clears them. `update_metrics`: what the agent's updates report beside td_loss and q_mean (its
    registry entry's), each averaged like them."""

    def __init__(self, update_metrics=()):
        self.update_metrics = tuple(update_metrics)
        self._clear()

    def _clear(self):
        self.return_sum = self.length_sum = self.episodes = 0.0
        self.loss_sum = self.q_sum = self.updates = 0.0
        self.update_metric_sums = np.zeros(len(self.update_metrics))
        self.episode_rows = []  # (env steps at the end, env, return, length, seconds of training at the end)

    def record_episodes(self, env_steps: int, envs: np.ndarray, returns: np.ndarray, lengths: np.ndarray,
                        wall_s: float) -> None:
        self.return_sum += float(np.sum(returns))
        self.length_sum += float(np.sum(lengths))
        self.episodes += len(returns)
        self.episode_rows.extend(zip([env_steps] * len(envs), envs.tolist(), returns.tolist(), lengths.tolist(),
                                     [wall_s] * len(envs)))

    def record_update(self, metrics: Dict[str, float]) -> None:
        self.loss_sum += metrics["td_loss"]
        self.q_sum += metrics["q_mean"]
        self.update_metric_sums += [metrics[name] for name in self.update_metrics]
        self.updates += 1

    def reduce(self) -> Tuple[Dict[str, float], List[list]]:
        """Collective: every rank must call it at the same point. Returns the means over all ranks and each
        rank's episode rows (a list per rank, in rank order)."""
        totals = collectives.sum_over_ranks(
            np.concatenate([[self.return_sum, self.length_sum, self.episodes, self.loss_sum, self.q_sum, self.updates],
                            self.update_metric_sums]),
            name="metrics_window")
        episode_rows = collectives.gather_objects(self.episode_rows, "episode_rows")
        (return_sum, length_sum, episodes, loss_sum, q_sum, updates), update_metric_sums = totals[:6], totals[6:]
        self._clear()
        return {
            "episode_return_mean": return_sum / episodes if episodes else math.nan,
            "episode_length_mean": length_sum / episodes if episodes else math.nan,
            "episodes_in_window": int(episodes),
            "td_loss": loss_sum / updates if updates else math.nan,
            "q_mean": q_sum / updates if updates else math.nan,
            **{name: total / updates if updates else math.nan
               for name, total in zip(self.update_metrics, update_metric_sums)},
        }, episode_rows


def episodes_as_played(rows_by_rank: List[list]) -> List[tuple]:
    """Every rank's finished episodes (RankMetrics.reduce's rows) as (env steps, rank, env, return, length,
    wall_s), in the order they were played: by the job's env steps at their end, then rank and env."""
    return sorted((env_steps, rank, *row) for rank, rows in enumerate(rows_by_rank) for env_steps, *row in rows)


class MetricsWriter:
    """Rank 0's console, TensorBoard and CSV output."""

    def __init__(self, logdir: str, total_env_steps: int, start_env_steps: int, frames_per_step: int,
                 resumed: bool = False, update_metrics=()):
        """`update_metrics`: the agent's own update metrics (RankMetrics'), written after q_mean."""
        import tensorflow as tf

        if resumed:
            for name in ("metrics.csv", "episodes.csv"):
                set_aside_rows_after(os.path.join(logdir, name), start_env_steps)

        self._total_env_steps = total_env_steps
        self._frames_per_step = frames_per_step
        self._last_env_steps = start_env_steps
        self._last_time = time.monotonic()
        self._tensorboard = tf.summary.create_file_writer(logdir)
        at = CSV_COLUMNS.index("q_mean") + 1
        self._update_metrics = tuple(update_metrics)
        self._tags = dict(TENSORBOARD_TAGS, **{name: f"losses/{name}" for name in update_metrics})
        self._csv_file, self._csv = _open_csv(os.path.join(logdir, "metrics.csv"),
                                              CSV_COLUMNS[:at] + self._update_metrics + CSV_COLUMNS[at:])
        self._episodes_file, self._episodes = _open_csv(os.path.join(logdir, "episodes.csv"), EPISODE_CSV_COLUMNS)

    def write_episodes(self, rows_by_rank: List[list]) -> None:
        """Appends each rank's finished episodes to episodes.csv, in the order they were played."""
        for env_steps, rank, env, episode_return, length, wall_s in episodes_as_played(rows_by_rank):
            self._episodes.writerow({"env_steps": env_steps, "env_frames": env_steps * self._frames_per_step,
                                     "rank": rank, "env": env, "return": _format(float(episode_return)),
                                     "length": length, "wall_s": f"{wall_s:.1f}"})
        self._episodes_file.flush()

    def write(self, row: Dict[str, float], eval_return_mean: Optional[float] = None) -> None:
        """Completes `row` (which carries the trainer's clock as `wall_time_s`) with throughput, then prints,
        logs to TensorBoard and appends to CSV."""
        import tensorflow as tf

        now = time.monotonic()
        env_steps = row["env_steps"]
        steps_per_second = (env_steps - self._last_env_steps) / max(now - self._last_time, 1e-9)
        self._last_env_steps, self._last_time = env_steps, now
        row = dict(row, env_steps_per_second=steps_per_second, env_frames=env_steps * self._frames_per_step)
        if eval_return_mean is not None:
            row["eval_return_mean"] = eval_return_mean
        self._csv.writerow({key: _format(value) for key, value in row.items()})
        self._csv_file.flush()
        with self._tensorboard.as_default(step=int(env_steps)):
            for column, tag in self._tags.items():
                value = row.get(column)
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    tf.summary.scalar(tag, value)
        self._tensorboard.flush()
        logging.info(self._progress_line(row, steps_per_second))

    def _progress_line(self, row, steps_per_second) -> str:
        env_steps = row["env_steps"]
        remaining = max(self._total_env_steps - env_steps, 0)
        eta = datetime.timedelta(seconds=round(remaining / steps_per_second)) if steps_per_second > 0 else "?"
        parts = [
            f"env steps {env_steps:,}/{self._total_env_steps:,} ({100.0 * env_steps / self._total_env_steps:.0f}%)",
            f"{steps_per_second:,.0f} steps/s",
            f"ETA {eta}",
            f"return {row['episode_return_mean']:.1f} over {row['episodes_in_window']} episodes",
            f"td loss {row['td_loss']:.4f}",
            *(f"{name.replace('_', ' ')} {row[name]:.4g}" for name in self._update_metrics),
            f"eps {row['epsilon']:.3f}",
            f"updates {row['updates']:,}",
        ]
        if "eval_return_mean" in row:
            parts.append(f"eval return {row['eval_return_mean']:.1f}")
        return " | ".join(parts)

    def close(self) -> None:
        self._csv_file.close()
        self._episodes_file.close()
        self._tensorboard.close()


def set_aside_rows_after(path: str, env_steps: int) -> Optional[str]:
    """A run that ended without a checkpoint at its last step (a crash, a killed job) logged rows after the
    checkpoint a resume starts from; the resumed run plays those env steps again and logs them anew. Those
    rows move from `path` to `<name>.after_<env_steps>.csv` beside it (appended, never lost), so that the CSV
    holds one timeline. Returns the side file's path, or None when there was nothing to move."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = list(reader)
    column = header.index("env_steps")
    later = [row for row in rows if row and int(float(row[column])) > env_steps]
    if not later:
        return None
    stem, extension = os.path.splitext(path)
    aside = f"{stem}.after_{env_steps}{extension}"
    new_file = not os.path.exists(aside)
    with open(aside, "a", newline="") as handle:
        writer = csv.writer(handle)
        if new_file:
            writer.writerow(header)
        writer.writerows(later)
    kept = [row for row in rows if row and int(float(row[column])) <= env_steps]
    temporary = path + ".tmp"
    with open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(kept)
    os.replace(temporary, path)  # the side file is complete before the rows leave the CSV
    logging.warning("%s: %d row(s) logged after the checkpoint at %s env steps (the run ended without a "
                    "checkpoint at its last step) moved to %s; the resumed run plays those steps again",
                    path, len(later), f"{env_steps:,}", aside)
    return aside


def _open_csv(path: str, columns):
    """A DictWriter appending to `path`. An existing file keeps its own header (so a run resumed by a newer
    version still writes rows that line up); columns it lacks are left out."""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, newline="") as handle:
            columns = next(csv.reader(handle))
        handle = open(path, "a", newline="")
        return handle, csv.DictWriter(handle, fieldnames=columns, restval="", extrasaction="ignore")
    handle = open(path, "w", newline="")
    writer = csv.DictWriter(handle, fieldnames=columns, restval="", extrasaction="ignore")
    writer.writeheader()
    return handle, writer


def _format(value):
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return value


def log_settings(config, memory_name: str, memory, world_size: int, logdir: str) -> None:
    """Rank 0, once per job: the size of what the agent learns from (`memory_name`: its replay memory or rollout),
    every setting and the schedules as the ranks run them on the console, and the settings in
    <logdir>/config.json (which the evaluation, export and plots read)."""
    logging.info("%s: %s transitions per rank, %d bytes per transition", memory_name, f"{memory.capacity:,}",
                 memory.bytes_per_transition)
    logging.info("settings:\n%s", config.to_json())
    if scales_schedules(config):
        logging.info("--scale_schedules_by_workers, %d ranks: %s", world_size,
                     update_counted_schedules(config, world_size))
    warning = unscaled_schedules_warning(config, world_size)
    if warning:
        logging.warning("%s", warning)
    caution = rank_count_caution(config, world_size)
    if caution:
        logging.warning("%s", caution)
    with open(os.path.join(logdir, "config.json"), "w") as handle:
        handle.write(config.to_json())
