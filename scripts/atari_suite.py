#!/usr/bin/env python
"""A suite of Atari runs against Dopamine's published agents, game by game, from the runs' raw episodes:

    .venv/bin/python scripts/atari_suite.py results/atari/*_seed* results/breakout_pqn --window=3 \
        --out=results/atari/suite

For each game (from each run's config.json), the mean training return of the runs' episodes that ended in
Dopamine's iteration --window (250,000 agent steps each; 3 is 750k-1M), per seed and over the seeds, beside the
mean [min, max] over 5 seeds of each of Dopamine's agents (hvd_dqn/baselines/dopamine_atari_cnn.json); whether
the runs' mean is above Dopamine's DQN and Rainbow; and each run's agent steps per second of training (its
env steps over its seconds of training, from episodes.csv's wall_s; a run that shared its machine says so only
through a lower figure). Writes OUT.md (the table), OUT.json and OUT.png (one panel per game: each run's
per-window means over Dopamine's DQN and Rainbow bands).
"""
import argparse
import collections
import json
import math
import os
import sys

PROGRAM = "atari_suite.py"
DOPAMINE_AGENTS = ("DQN", "C51", "Rainbow", "QR-DQN", "IQN")
BANDS = ("DQN", "Rainbow")


class SuiteError(Exception):
    pass


def run_summary(logdir: str, window: int) -> dict:
    """One run: its game, seed, per-window means (Dopamine's windows), the chosen window's mean and its speed."""
    from hvd_dqn.baselines import dopamine_curve
    from hvd_dqn.envs import atari_game
    from hvd_dqn.logdir.curves import CurveError, load_run, window_means

    try:
        run = load_run(logdir)
    except (CurveError, OSError) as error:
        raise SuiteError(f"{logdir}: {error}") from None
    game = atari_game(run.env_id)
    if game is None:
        raise SuiteError(f"{logdir}: env_id {run.env_id!r} is not an Atari game")
    game = game.replace("_", "")  # ale-py's space_invaders is Dopamine's spaceinvaders
    window_env_steps = dopamine_curve(game).window_env_steps
    windows = window_means(logdir, window_env_steps)
    if len(windows) <= window or not windows[window].complete:
        raise SuiteError(f"{logdir}: the run did not reach the end of window {window} "
                         f"({(window + 1) * window_env_steps:,} agent steps)")
    with open(os.path.join(logdir, "config.json")) as handle:
        config = json.load(handle)
    # Agent steps per second of training: the last episode's end over its seconds of training (resumes included).
    steps = run.episode_frames / run.frames_per_step
    seconds = float(run.episode_wall_s[-1]) if len(run.episode_wall_s) else float("nan")
    return dict(logdir=logdir, game=game, env_id=run.env_id, seed=config.get("seed", 0),
                agent=config.get("agent", "dqn"),
                window_means=[None if math.isnan(w.mean_return) else round(w.mean_return, 3) for w in windows],
                mean=round(windows[window].mean_return, 3), episodes=windows[window].episodes,
                agent_steps_per_s=round(float(steps[-1]) / seconds, 1) if seconds == seconds and seconds > 0 else None)


def suite(logdirs, window: int) -> dict:
    from hvd_dqn.baselines import dopamine_curve

    runs = [run_summary(logdir, window) for logdir in logdirs]
    games = collections.OrderedDict()
    for run in runs:
        games.setdefault(run["game"], []).append(run)
    rows = []
    for game, game_runs in games.items():
        means = [run["mean"] for run in game_runs]
        row = dict(game=game, seeds=[run["seed"] for run in game_runs], means=means,
                   mean=round(sum(means) / len(means), 3), low=min(means), high=max(means),
                   agent_steps_per_s=[run["agent_steps_per_s"] for run in game_runs], dopamine={})
        for agent in DOPAMINE_AGENTS:
            curve = dopamine_curve(game, agent)
            row["dopamine"][agent] = dict(mean=round(curve.mean(window), 3), low=round(curve.low(window), 3),
                                          high=round(curve.high(window), 3))
        row["above_dqn"] = row["mean"] > row["dopamine"]["DQN"]["mean"]
        row["above_rainbow"] = row["mean"] > row["dopamine"]["Rainbow"]["mean"]
        rows.append(row)
    return dict(window=window, window_agent_steps=[window * 250_000, (window + 1) * 250_000], rows=rows, runs=runs,
                games_above_dqn=sum(row["above_dqn"] for row in rows),
                games_above_rainbow=sum(row["above_rainbow"] for row in rows), games=len(rows))


def markdown(result: dict, label: str) -> str:
    start, end = (f"{value // 1_000_000}M" if value and value % 1_000_000 == 0 else f"{value // 1000}k"
                  for value in result["window_agent_steps"])
    lines = [f"Mean training return over {start}-{end} agent steps (Dopamine's iteration {result['window']}); "
             "Dopamine's agents: mean [min, max] of 5 seeds.", "",
             f"| game | {label}: seeds | {label}: mean [min, max] | " + " | ".join(DOPAMINE_AGENTS)
             + " | above DQN | above Rainbow | agent steps/s |",
             "|---|---:|---|" + "---|" * len(DOPAMINE_AGENTS) + ":---:|:---:|---|"]
    for row in result["rows"]:
        ours = f"**{row['mean']:,.1f}**" + (f" [{row['low']:,.1f}, {row['high']:,.1f}]" if len(row["means"]) > 1
                                             else "")
        published = " | ".join(f"{value['mean']:,.1f} [{value['low']:,.1f}, {value['high']:,.1f}]"
                               for value in row["dopamine"].values())
        speeds = ", ".join("-" if speed is None else f"{speed:,.0f}" for speed in row["agent_steps_per_s"])
        lines.append(f"| {row['game']} | {len(row['means'])} | {ours} | {published} | "
                     f"{'yes' if row['above_dqn'] else 'no'} | {'yes' if row['above_rainbow'] else 'no'} | {speeds} |")
    lines += ["", f"Above Dopamine's DQN on {result['games_above_dqn']} of {result['games']} games, above its Rainbow "
              f"on {result['games_above_rainbow']} of {result['games']}."]
    return "\n".join(lines)


def draw(result: dict, label: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hvd_dqn.baselines import dopamine_curve
    from hvd_dqn.logdir.curves import save_figure

    rows = result["rows"]
    columns = min(3, len(rows))
    lines = math.ceil(len(rows) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.2 * lines), dpi=110, squeeze=False)
    last_window = result["window"] + 1
    for panel, row in zip(axes.flat, rows):
        for index, agent in enumerate(BANDS):
            curve = dopamine_curve(row["game"], agent)
            middles = [(i + 0.5) * curve.window_env_steps / 1e6 for i in range(last_window)]
            color = f"C{index + 1}"
            panel.plot(middles, [curve.mean(i) for i in range(last_window)], "-", color=color,
                       label=f"Dopamine {agent}")
            panel.fill_between(middles, [curve.low(i) for i in range(last_window)],
                               [curve.high(i) for i in range(last_window)], color=color, alpha=0.2, linewidth=0)
        game_runs = [run for run in result["runs"] if run["game"] == row["game"]]
        for marker, run in zip("os^vD", game_runs):
            means = run["window_means"][:last_window]
            panel.plot([(i + 0.5) * 0.25 for i in range(len(means))], means, f"{marker}-", color="C0", linewidth=1.5,
                       alpha=0.9, label=f"{label}, seed {run['seed']}" if len(game_runs) > 1 else label)
        panel.set_title(row["game"])
        panel.grid(alpha=0.3)
        panel.set_xlabel("agent steps (M)")
    for panel in list(axes.flat)[len(rows):]:
        panel.axis("off")
    axes.flat[0].set_ylabel("mean training return per 250k-step window")
    axes.flat[0].legend(fontsize="x-small", loc="upper left")
    figure.suptitle(f"{label} against Dopamine's published DQN and Rainbow (bands: min-max of 5 seeds)")
    save_figure(figure, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdirs", nargs="+", help="Runs: hvd_dqn.train --logdir folders or results/ folders.")
    parser.add_argument("--window", type=int, default=3, help="Dopamine's iteration to compare (3: 750k-1M).")
    parser.add_argument("--label", default="hvd_dqn", help="The runs' name in the table and figure.")
    parser.add_argument("--out", required=True, help="Writes OUT.md, OUT.json and OUT.png.")
    args = parser.parse_args(argv)
    try:
        if args.window < 0:
            raise SuiteError(f"--window={args.window}: must be an iteration >= 0")
        result = suite(args.logdirs, args.window)
    except (SuiteError, ValueError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    text = markdown(result, args.label)
    print(text)
    try:
        with open(args.out + ".md", "w") as handle:
            handle.write(text + "\n")
        with open(args.out + ".json", "w") as handle:
            json.dump(result, handle, indent=1)
            handle.write("\n")
        draw(result, args.label, args.out + ".png")
    except OSError as error:
        print(f"{PROGRAM}: error: cannot write {args.out}.* ({error})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
