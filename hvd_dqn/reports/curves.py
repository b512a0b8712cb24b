"""Learning curves from training logdirs, drawn into a PNG (raw episode return against env frames):

    .venv/bin/python -m hvd_dqn.reports.curves runs/pong --out=pong.png
    .venv/bin/python -m hvd_dqn.reports.curves dqn=runs/s0,runs/s1,runs/s2 rainbow=runs/r0,runs/r1 --out=cmp.png

Each positional argument is one curve, `[label=]logdir[,logdir...]`. The target return is drawn as a dashed
line: --target, or the runs' own --stop_at_train_return where they share one.

A run's <logdir>/episodes.csv holds every finished training episode (env steps and frames at its end, rank,
env, raw return). A curve is taken at evenly spaced points of env frames:
- one logdir: the line is the mean return of the run's last `window` episodes, its ranks' pooled (the figure
  `hvd_dqn.reports.score` reports, so runs of different rank counts compare at the same episodes); the band is the
  range over its ranks, each rank's last window / ranks episodes (how differently the ranks' envs fared);
- several logdirs in one curve (seeds of one setting): the line is the mean over the runs of each run's last
  `window` episodes, its ranks pooled, and the band their range.
Evaluation returns (metrics.csv, eval_return_mean) are drawn as markers.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import json
import argparse
import os
import sys
import warnings
from typing import Dict, List, Optional

import numpy as np


class CurveError(Exception):
    """A logdir that cannot be plotted, with the reason."""


@dataclasses.dataclass
class RunLog:
    logdir: str
    env_id: str
    frames_per_step: int
    episode_frames: np.ndarray  # env frames (summed over ranks) at each episode's end
    episode_ranks: np.ndarray
    episode_returns: np.ndarray  # raw game scores
    episode_wall_s: np.ndarray  # seconds of training at each episode's end (NaN in files written before wall_s)
    eval_frames: np.ndarray
    eval_returns: np.ndarray
    final_frames: int  # the last env frame count the run logged
    target_return: Optional[float] = None  # the run's --stop_at_train_return, if it had one


@functools.lru_cache(maxsize=None)
def local_copy(logdir: str) -> str:
    """The folder to read a run's logs from: `logdir` itself, or for an object-store URL such as
    s3://bucket/runs/x a local folder holding copies of its episodes.csv, metrics.csv and config.json (copied
    once per process, however many readers ask)."""
    from hvd_dqn.logdir import storage

    if not storage.is_remote(logdir):
        return logdir
    local = storage.scratch_folder("hvd_dqn_run_")
    try:
        fetched = storage.fetch_files(logdir, ("episodes.csv", "metrics.csv", "config.json"), local)
    except storage.StorageError as error:
        raise CurveError(str(error)) from None
    if "episodes.csv" not in fetched:
        raise CurveError(f"{logdir}: no episodes.csv (is it a hvd_dqn.train --logdir that has logged at least "
                         "once?)")
    return local


def load_run(logdir: str) -> RunLog:
    """Reads a training logdir's episodes.csv, metrics.csv and config.json (a local folder, or an object-store
    URL, read from its `local_copy`)."""
    if local_copy(logdir) != logdir:
        return dataclasses.replace(load_run(local_copy(logdir)), logdir=logdir)
    episodes_path = os.path.join(logdir, "episodes.csv")
    if not os.path.isdir(logdir):
        raise CurveError(f"{logdir}: no such folder")
    if not os.path.exists(episodes_path):
        raise CurveError(f"{logdir}: no episodes.csv (is it a hvd_dqn.train --logdir that has logged at least once?)")
    env_id, frames_per_step, target = "?", 1, None
    config_path = os.path.join(logdir, "config.json")
    if os.path.exists(config_path):
        from hvd_dqn.envs import frames_per_step as frames_per_step_of

        with open(config_path) as handle:
            config = json.load(handle)
        env_id, target = config.get("env_id", "?"), config.get("stop_at_train_return")
        frames_per_step = frames_per_step_of(env_id) if env_id != "?" else 1
    episodes = _read_columns(episodes_path, ("env_frames", "rank", "return"))
    wall_s = _read_columns(episodes_path, ("wall_s",), optional=True)["wall_s"]
    metrics = _read_columns(os.path.join(logdir, "metrics.csv"), ("env_frames", "eval_return_mean"))
    logged = metrics["env_frames"] if len(metrics["env_frames"]) else episodes["env_frames"]
    has_eval = ~np.isnan(metrics["eval_return_mean"])
    return RunLog(logdir=logdir, env_id=env_id, frames_per_step=frames_per_step,
                  episode_frames=episodes["env_frames"], episode_ranks=episodes["rank"].astype(np.int64),
                  episode_returns=episodes["return"], episode_wall_s=wall_s,
                  eval_frames=metrics["env_frames"][has_eval],
                  eval_returns=metrics["eval_return_mean"][has_eval],
                  final_frames=int(np.max(logged)) if len(logged) else 0,
                  target_return=float(target) if target is not None and np.isfinite(float(target)) else None)


def _read_columns(path: str, names, optional: bool = False) -> Dict[str, np.ndarray]:
    """Float columns of a CSV (empty cells become NaN); a missing file gives empty columns. A column the file
    lacks is an error, or with `optional` all NaN."""
    columns = {name: [] for name in names}
    if os.path.exists(path):
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [name for name in names if name not in (reader.fieldnames or ())]
            if missing and not optional:
                raise CurveError(f"{path}: no column {', '.join(missing)} (written by an older hvd_dqn?)")
            for row in reader:
                for name in names:
                    columns[name].append(float(row[name]) if row.get(name, "") != "" else np.nan)
    return {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}


def trailing_mean(ends: np.ndarray, returns: np.ndarray, points: np.ndarray, window: int,
                  last: Optional[float] = None) -> np.ndarray:
    """At each of `points`, the mean return of the last `window` episodes that ended at or before it; NaN
    before the first episode and after `last` (the end of that run)."""
    order = np.argsort(ends, kind="stable")
    ends, returns = ends[order], returns[order]
    cumulative = np.concatenate([[0.0], np.cumsum(returns)])
    count = np.searchsorted(ends, points, side="right")  # episodes finished by each point
    first = np.maximum(count - window, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (cumulative[count] - cumulative[first]) / (count - first)
    means[count == 0] = np.nan
    if last is not None:
        means[points > last] = np.nan
    return means


@dataclasses.dataclass
class Curve:
    label: str
    points: np.ndarray  # env frames
    mean: np.ndarray
    low: np.ndarray  # band: min over the group
    high: np.ndarray  # band: max over the group
    group: str  # "ranks" or "runs"
    group_size: int
    eval_points: List[np.ndarray]  # per run
    eval_returns: List[np.ndarray]


def make_curve(label: str, runs: List[RunLog], window: int, num_points: int = 200) -> Curve:
    """One curve: over ranks for a single run, over runs for several."""
    end = max(run.final_frames for run in runs)
    points = np.linspace(0.0, end, num_points)
    if len(runs) == 1:
        # Each rank's own last `window` episodes would span `ranks` times the env steps of one rank's run and lag
        # behind it; the pooled window and each rank's share of it span the same env steps at any rank count.
        run = runs[0]
        ranks = np.unique(run.episode_ranks)
        rank_window = max(1, -(-window // max(len(ranks), 1)))
        values = _trailing_means([(run.episode_frames[run.episode_ranks == rank],
                                   run.episode_returns[run.episode_ranks == rank], run.final_frames)
                                  for rank in ranks], points, rank_window)
        pooled = trailing_mean(run.episode_frames, run.episode_returns, points, window, run.final_frames)
        group, group_size = "ranks", len(ranks)
    else:
        values = _trailing_means([(run.episode_frames, run.episode_returns, run.final_frames) for run in runs],
                                 points, window)
        pooled, group, group_size = None, "runs", len(runs)
    with warnings.catch_warnings():  # all-NaN columns (before any episode ended) stay NaN quietly
        warnings.simplefilter("ignore", category=RuntimeWarning)
        mean, low, high = np.nanmean(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)
    if pooled is not None:
        mean = pooled
    return Curve(label, points, mean, low, high, group, group_size,
                 [run.eval_frames for run in runs], [run.eval_returns for run in runs])


def _trailing_means(members, points: np.ndarray, window: int) -> np.ndarray:
    """One row per (episode ends, returns, last frame) member: its trailing means at `points`."""
    if not members:
        return np.full((1, len(points)), np.nan)
    return np.stack([trailing_mean(ends, returns, points, window, last) for ends, returns, last in members])


def parse_curve_argument(argument: str):
    """`[label=]logdir[,logdir...]` -> (label, [logdirs]); the label defaults to the first logdir's name."""
    label, _, paths = argument.partition("=") if "=" in argument else ("", "", argument)
    logdirs = [path for path in paths.split(",") if path]
    if not logdirs:
        raise CurveError(f"{argument}: no logdir given")
    return label or os.path.basename(os.path.normpath(logdirs[0])), logdirs


@dataclasses.dataclass
class WindowMean:
    """The training episodes that ended in one window of env steps [start, end), as Dopamine reports them."""

    start: int
    end: int
    episodes: int
    mean_return: float  # NaN without episodes
    complete: bool  # the run got to the window's end


def window_means(logdir: str, window_env_steps: int) -> List[WindowMean]:
    """Mean raw return of the training episodes ending in each window of `window_env_steps` env steps
    (summed over ranks), from the run's episodes.csv. An episode belongs to the window its last step falls
    in (Dopamine counts an episode in the iteration that starts it; Breakout episodes last hundreds of steps
    against windows of 250k, so the two differ by a few episodes at each boundary)."""
    if window_env_steps <= 0:
        raise CurveError(f"window of {window_env_steps} env steps: must be positive")
    run = load_run(logdir)
    ends = run.episode_frames / run.frames_per_step  # env steps at each episode's end
    last_step = run.final_frames / run.frames_per_step
    count = max(1, int(np.ceil(max(last_step, ends.max(initial=0)) / window_env_steps)))
    # An episode ending exactly at a boundary step s has taken steps s-length+1 .. s: window (s - 1) // W.
    index = np.maximum(ends - 1, 0) // window_env_steps
    rows = []
    for window in range(count):
        returns = run.episode_returns[index == window]
        start, end = window * window_env_steps, (window + 1) * window_env_steps
        rows.append(WindowMean(start, end, len(returns), float(returns.mean()) if len(returns) else float("nan"),
                               last_step >= end))
    return rows


def save_figure(figure, path: str) -> None:
    """Writes a matplotlib figure to `path` (PNG) through a temporary file, so a half-written PNG never replaces
    a good one, and closes the figure."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    temporary = path + ".tmp.png"
    figure.savefig(temporary)
    plt.close(figure)
    os.replace(temporary, path)


PROGRAM = "python -m hvd_dqn.reports.curves"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", nargs="+", metavar="[LABEL=]LOGDIR[,LOGDIR...]")
    parser.add_argument("--out", required=True, help="PNG file to write.")
    parser.add_argument("--window", type=int, default=10, help="Episodes averaged at each point (default 10).")
    parser.add_argument("--title", default=None, help="Figure title (default: the environment ids).")
    parser.add_argument("--target", type=float, default=None,
                        help="A return to draw as a dashed line (default: the runs' --stop_at_train_return, where "
                             "they all have the same one).")
    args = parser.parse_args(argv)

    try:
        if args.window <= 0:
            raise CurveError(f"--window={args.window}: must be a positive number of episodes")
        if not args.out.lower().endswith(".png"):
            raise CurveError(f"--out={args.out}: must end in .png")
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder):
            raise CurveError(f"--out={args.out}: folder {folder} does not exist")
        curves, env_ids, frames_per_step, targets = [], set(), set(), set()
        for argument in args.curves:
            label, logdirs = parse_curve_argument(argument)
            runs = [load_run(logdir) for logdir in logdirs]
            env_ids.update(run.env_id for run in runs)
            frames_per_step.update(run.frames_per_step for run in runs)
            targets.update(run.target_return for run in runs)
            curves.append(make_curve(label, runs, args.window))
        target = args.target if args.target is not None else (targets.pop() if len(targets) == 1 else None)
        draw(curves, args.out, args.title or ", ".join(sorted(env_ids)), frames_per_step == {1}, args.window, target)
    except (CurveError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


def draw(curves, path: str, title: str, steps_are_frames: bool, window: int, target=None) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for index, curve in enumerate(curves):
        color = f"C{index}"
        banded = curve.group_size > 1  # one rank's or one run's curve has no range to draw
        axes.plot(curve.points, curve.mean, color=color,
                  label=f"{curve.label} (band: range over {curve.group_size} {curve.group})" if banded else curve.label)
        if banded:
            axes.fill_between(curve.points, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
        for eval_index, (points, returns) in enumerate(zip(curve.eval_points, curve.eval_returns)):
            axes.plot(points, returns, "o", color=color, markersize=4, markeredgecolor="black",
                      markeredgewidth=0.5, label=f"{curve.label} evaluation" if eval_index == 0 and len(points) else None)
    if target is not None:
        axes.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:g}")
    axes.set_xlabel("env steps (summed over ranks)" if steps_are_frames else "emulator frames (summed over ranks)")
    axes.set_ylabel(f"episode return (raw score; mean of last {window} episodes)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    save_figure(figure, path)


if __name__ == "__main__":
    from hvd_dqn.cli import exit_with

    exit_with(main)
