"""A finished run's score, from its logdir (or a results/ folder holding its episodes.csv and config.json):

    .venv/bin/python -m hvd_dqn.reports.score results/minatar_breakout                  # the last 100 episodes
    .venv/bin/python -m hvd_dqn.reports.score runs/cp --target=475 --window=100         # when it was solved
    .venv/bin/python -m hvd_dqn.reports.score results/atari/breakout_qrdqn_seed0 --per=100000  # how it learnt

Prints the mean training return of the last --episodes episodes (ordered by the env step each ended at, over
all ranks) with its standard error (the sample standard deviation over sqrt(episodes)): the figure the README's
MinAtar table quotes. With --target, also the env steps and seconds of training at which --window consecutive
episodes first averaged at least --target (gymnasium's rule for "solved"), as the scaling study counts them.
With --per, also a table by windows of that many env steps (Dopamine reports by iterations of 250k): each
window's episodes and mean training return beside what metrics.csv logged in it (the loss's and Q's range, the
learnt return distributions' spread where the agent logs it, greedy evaluations, env steps per second), the
figures that say why a run learnt as it did.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

import numpy as np

PROGRAM = "python -m hvd_dqn.reports.score"


class ScoreError(Exception):
    """A run whose episodes cannot be read (no episodes.csv, a damaged one), or a bad argument."""




def episode_at_target(episodes, target: float, window: int):
    """episodes: (env_steps_at_end, return, ...) in any order. The episode whose end completes the first
    `window` consecutive episodes (by env steps) that average at least `target`, or None."""
    ordered = sorted(episodes, key=lambda episode: episode[0])
    total = 0.0
    for index, episode in enumerate(ordered):
        total += episode[1]
        if index >= window:
            total -= ordered[index - window][1]
        if index + 1 >= window and total / window >= target:
            return episode
    return None


def env_steps_to_target(episodes, target: float, window: int):
    """The env steps at which the target was reached (see `episode_at_target`), or None."""
    reached = episode_at_target(episodes, target, window)
    return None if reached is None else int(reached[0])


def wall_s_to_target(episodes, target: float, window: int):
    """The seconds of training at which the target was reached, from episodes (env_steps, return, wall_s),
    or None: not reached, or episodes.csv written before it had wall_s."""
    reached = episode_at_target(episodes, target, window)
    return None if reached is None or math.isnan(reached[2]) else round(float(reached[2]), 1)


def final_return(episodes, window: int):
    ordered = sorted(episodes, key=lambda episode: episode[0])[-window:]
    return sum(episode[1] for episode in ordered) / len(ordered) if ordered else None


def read_run(logdir: str, log_hint: bool = True):
    """(env id, [(env steps at the episode's end, return, seconds of training then), ...]) of a finished run,
    from its logdir. A run the study trained has its output beside it, in LOGDIR.log (`log_hint`)."""
    from hvd_dqn.reports.curves import CurveError, load_run

    try:
        run = load_run(logdir)
    except CurveError as error:
        raise ScoreError(f"{error} (see {logdir}.log)" if log_hint else str(error)) from None
    ends = (run.episode_frames // run.frames_per_step).astype(int)
    return run.env_id, list(zip(ends.tolist(), run.episode_returns.tolist(), run.episode_wall_s.tolist()))


def last_episodes(episodes, count: int):
    """(mean, standard error, episodes used) of the returns of the last `count` episodes by env step."""
    returns = [episode[1] for episode in sorted(episodes, key=lambda episode: episode[0])[-count:]]
    if not returns:
        return None, None, 0
    spread = statistics.stdev(returns) / math.sqrt(len(returns)) if len(returns) > 1 else float("nan")
    return statistics.fmean(returns), spread, len(returns)


WINDOW_METRICS = ("td_loss", "q_mean", "return_std", "eval_return_mean", "env_steps_per_second")


def by_windows(episodes, metrics: dict, per: int) -> list:
    """One dict per window (start, end] of `per` env steps up to the last logged: the episodes that ended in it
    and their mean return, and each of WINDOW_METRICS' values logged in it (metrics: column -> array, with
    env_steps; a column the run does not log is NaN throughout)."""
    logged = metrics["env_steps"]
    last = max([*(episode[0] for episode in episodes), *(logged.tolist() if len(logged) else [0])])
    rows = []
    for start in range(0, int(last), per):
        end = start + per
        returns = [episode[1] for episode in episodes if start < episode[0] <= end]
        inside = (logged > start) & (logged <= end)
        row = {"start": start, "end": end, "episodes": len(returns),
               "mean_return": statistics.fmean(returns) if returns else None}
        for name in WINDOW_METRICS:
            values = metrics[name][inside]
            row[name] = values[~np.isnan(values)].tolist()
        rows.append(row)
    return rows


def window_table(rows) -> str:
    def span(values):
        return f"{min(values):.3g} to {max(values):.3g}" if values else "-"

    def mean(values):
        return f"{statistics.fmean(values):.3g}" if values else "-"

    lines = ["| env steps | episodes | mean return | td loss | Q mean | return std | greedy eval | env steps/s |",
             "|---|---:|---:|---|---|---:|---|---:|"]
    for row in rows:
        episodes_return = "-" if row["mean_return"] is None else f"{row['mean_return']:,.1f}"
        evaluations = ", ".join(f"{value:,.1f}" for value in row["eval_return_mean"]) or "-"
        speed = f"{statistics.median(row['env_steps_per_second']):,.0f}" if row["env_steps_per_second"] else "-"
        lines.append(f"| {row['start']:,}-{row['end']:,} | {row['episodes']:,} | {episodes_return} | "
                     f"{span(row['td_loss'])} | {span(row['q_mean'])} | {mean(row['return_std'])} | {evaluations} | "
                     f"{speed} |")
    return "\n".join(lines)


def read_metrics(logdir: str) -> dict:
    """metrics.csv's env_steps and WINDOW_METRICS columns (NaN where not logged, or not a column of this run), from a
    local logdir or the local copy of an object-store one's (named by its URL in any message)."""
    from hvd_dqn.reports.curves import CurveError, _read_columns, local_copy

    try:
        folder = local_copy(logdir)
    except CurveError as error:
        raise ScoreError(str(error)) from None
    path = os.path.join(folder, "metrics.csv")
    try:
        columns = _read_columns(path, ("env_steps",))
    except CurveError as error:
        raise ScoreError(str(error).replace(folder, logdir)) from None
    return {**columns, **_read_columns(path, WINDOW_METRICS, optional=True)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", help="A run's logdir, or a results/ folder with its episodes.csv and config.json.")
    parser.add_argument("--episodes", type=int, default=100, help="Episodes averaged at the end (default 100).")
    parser.add_argument("--target", type=float, default=None, help="A return to report the first crossing of.")
    parser.add_argument("--window", type=int, default=100,
                        help="Consecutive episodes whose mean must reach --target (default 100).")
    parser.add_argument("--per", type=int, default=None,
                        help="Also a table by windows of this many env steps: returns, loss, Q, the return "
                             "distributions' spread, evaluations and speed.")
    args = parser.parse_args(argv)

    try:
        if args.episodes <= 0 or args.window <= 0:
            raise ScoreError(f"--episodes={args.episodes} --window={args.window}: both must be positive")
        if args.per is not None and args.per <= 0:
            raise ScoreError(f"--per={args.per}: the window must be a positive number of env steps")
        metrics = read_metrics(args.logdir) if args.per else None
        env_id, episodes = read_run(args.logdir, log_hint=False)
        if not episodes:
            raise ScoreError(f"{args.logdir}: its episodes.csv holds no finished episode yet")
    except ScoreError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    mean, error, used = last_episodes(episodes, args.episodes)
    last_step = max(episode[0] for episode in episodes)
    print(f"{args.logdir}: {env_id}, {len(episodes):,} episodes to {last_step:,} env steps; the last {used}: "
          f"mean return {mean:.2f}, standard error {error:.2f}")
    if args.target is not None:
        reached = episode_at_target(episodes, args.target, args.window)
        if reached is None:
            print(f"  {args.window} consecutive episodes never averaged {args.target:g}")
        else:
            seconds = "" if math.isnan(reached[2]) else f", {reached[2]:.1f} s of training"
            print(f"  {args.window} consecutive episodes first averaged {args.target:g} at {int(reached[0]):,} env "
                  f"steps{seconds}")
    if metrics is not None:
        print(window_table(by_windows(episodes, metrics, args.per)))
    return 0


if __name__ == "__main__":
    from hvd_dqn.cli import exit_with

    exit_with(main)
