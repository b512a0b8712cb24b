"""Compares a run with Dopamine's published curve, in Dopamine's terms: per iteration of 250,000 agent steps,
the mean return of the training episodes, beside the published mean and range over Dopamine's 5 seeds.

    .venv/bin/python -m hvd_dqn.reports.baseline runs/breakout_dopamine --out=breakout.png
    .venv/bin/python -m hvd_dqn.reports.baseline runs/b --agent=DQN --also=Rainbow,QR-DQN --json=table.json

The game comes from the run's config.json (ALE/Breakout-v5 -> breakout); the published numbers from
hvd_dqn/baselines/dopamine_atari_cnn.json, with their source. Prints a Markdown table; --out draws the run's
per-window means over the published band(s); --json writes the table.
"""
import argparse
import json
import math
import os
import sys

PROGRAM = "python -m hvd_dqn.reports.baseline"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", help="A hvd_dqn.train --logdir (or a results/<run> folder with episodes.csv).")
    parser.add_argument("--agent", default="DQN", help="Dopamine agent to compare with (default DQN).")
    parser.add_argument("--also", default="", help="More Dopamine agents to draw, comma-separated (e.g. Rainbow).")
    parser.add_argument("--game", default=None, help="Dopamine game name; default: from the run's env_id.")
    parser.add_argument("--label", default=None, help="The run's name in the table and plot (default: its folder).")
    parser.add_argument("--out", default=None, help="PNG file to draw into.")
    parser.add_argument("--json", default=None, help="JSON file to write the table into.")
    args = parser.parse_args(argv)

    from hvd_dqn.envs import atari_game
    from hvd_dqn.reports.curves import CurveError, load_run, window_means
    from hvd_dqn.baselines import dopamine_curve

    try:
        if args.out and not args.out.lower().endswith(".png"):
            raise CurveError(f"--out={args.out}: must end in .png")
        run = load_run(args.logdir)
        game = args.game or atari_game(run.env_id)
        if game is None:
            raise CurveError(f"{args.logdir}: env_id {run.env_id!r} is not an Atari game; pass --game")
        game = game.replace("_", "")  # ale-py's space_invaders is Dopamine's spaceinvaders
        reference = dopamine_curve(game, args.agent)
        others = [dopamine_curve(game, agent) for agent in filter(None, args.also.split(","))]
        windows = window_means(args.logdir, reference.window_env_steps)
    except (CurveError, ValueError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    label = args.label or os.path.basename(os.path.normpath(args.logdir))
    rows = table(windows, reference)
    print(markdown(rows, label, reference))
    try:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(dict(run=label, logdir=args.logdir, env_id=run.env_id, game=game,
                               reference_agent=reference.agent, reference_source=reference.source, windows=rows),
                          handle, indent=2)
                handle.write("\n")
        if args.out:
            draw(rows, reference, others, label, args.out)
            print(f"wrote {args.out}")
    except OSError as error:
        print(f"{PROGRAM}: error: cannot write ({error})", file=sys.stderr)
        return 2
    return 0


def table(windows, reference):
    """One dict per window the run reached into: the run's episodes and mean beside the published numbers."""
    rows = []
    for index, window in enumerate(windows):
        row = dict(iteration=index, start_env_steps=window.start, end_env_steps=window.end,
                   complete=window.complete, episodes=window.episodes,
                   mean_return=None if math.isnan(window.mean_return) else round(window.mean_return, 3))
        if index < len(reference.seeds_by_window):
            row.update(published_mean=round(reference.mean(index), 3), published_min=round(reference.low(index), 3),
                       published_max=round(reference.high(index), 3))
        rows.append(row)
    return rows


def markdown(rows, label, reference) -> str:
    lines = [f"| agent steps | {label}: episodes | {label}: mean return | Dopamine {reference.agent}: mean "
             f"[min, max] of {len(reference.seeds_by_window[0])} seeds |",
             "|---|---:|---:|---|"]
    for row in rows:
        steps = f"{row['start_env_steps'] / 1e3:,.0f}k-{row['end_env_steps'] / 1e3:,.0f}k"
        if not row["complete"]:
            steps += " (partial)"
        mean = "-" if row["mean_return"] is None else f"{row['mean_return']:.1f}"
        published = (f"{row['published_mean']:.1f} [{row['published_min']:.1f}, {row['published_max']:.1f}]"
                     if "published_mean" in row else "-")
        lines.append(f"| {steps} | {row['episodes']} | {mean} | {published} |")
    return "\n".join(lines)


def draw(rows, reference, others, label, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hvd_dqn.reports.curves import save_figure

    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for index, curve in enumerate([reference] + others):
        iterations = range(min(len(curve.seeds_by_window), max(len(rows), 4)))
        middles = [(i + 0.5) * curve.window_env_steps for i in iterations]
        color = f"C{index + 1}"
        axes.plot(middles, [curve.mean(i) for i in iterations], "-", color=color,
                  label=f"Dopamine {curve.agent} (mean, band: min-max of {len(curve.seeds_by_window[0])} seeds)")
        axes.fill_between(middles, [curve.low(i) for i in iterations], [curve.high(i) for i in iterations],
                          color=color, alpha=0.2, linewidth=0)
    ours = [row for row in rows if row["mean_return"] is not None]
    axes.plot([(row["start_env_steps"] + row["end_env_steps"]) / 2 for row in ours],
              [row["mean_return"] for row in ours], "o-", color="C0", linewidth=2, label=f"{label} (hvd_dqn)")
    for row in ours:
        if not row["complete"]:
            axes.annotate("partial", ((row["start_env_steps"] + row["end_env_steps"]) / 2, row["mean_return"]),
                          textcoords="offset points", xytext=(5, -12), fontsize="small")
    axes.set_xlabel("agent steps (window midpoints; 4 frames each)")
    axes.set_ylabel(f"mean training-episode return per {reference.window_env_steps:,}-step window")
    axes.set_title(f"{reference.game}: hvd_dqn against Dopamine's published curves")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    save_figure(figure, path)


if __name__ == "__main__":
    from hvd_dqn.cli import exit_with

    exit_with(main)
