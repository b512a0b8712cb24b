"""A finished run's score, from its logdir (or a results/ folder holding its episodes.csv and config.json):

    .venv/bin/python -m hvd_dqn.reports.score results/minatar_breakout                  # the last 100 episodes
    .venv/bin/python -m hvd_dqn.reports.score runs/cp --target=475 --window=100         # when it was solved

Prints the mean training return of the last --episodes episodes (ordered by the env step each ended at, over
all ranks) with its standard error (the sample standard deviation over sqrt(episodes)): the figure the README's
MinAtar table quotes. With --target, also the env steps and seconds of training at which --window consecutive
episodes first averaged at least --target (gymnasium's rule for "solved"), as the scaling study counts them.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", help="A run's logdir, or a results/ folder with its episodes.csv and config.json.")
    parser.add_argument("--episodes", type=int, default=100, help="Episodes averaged at the end (default 100).")
    parser.add_argument("--target", type=float, default=None, help="A return to report the first crossing of.")
    parser.add_argument("--window", type=int, default=100,
                        help="Consecutive episodes whose mean must reach --target (default 100).")
    args = parser.parse_args(argv)

    try:
        if args.episodes <= 0 or args.window <= 0:
            raise ScoreError(f"--episodes={args.episodes} --window={args.window}: both must be positive")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
