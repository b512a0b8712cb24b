"""Compares a run with Dopamine's published curve, in Dopamine's terms: per iteration of 250,000 agent steps,
the mean return of the training episodes, beside the published mean and range over Dopamine's 5 seeds.

    .venv/bin/python -m hvd_dqn.reports.baseline runs/breakout_dopamine --out=breakout.png
    .venv/bin/python -m hvd_dqn.reports.baseline runs/b --agent=DQN --also=Rainbow,QR-DQN --json=table.json
    .venv/bin/python -m hvd_dqn.reports.baseline runs/b8 --label="8 ranks" --agent=QR-DQN \
        --beside="1 rank=runs/b1" --beside="2 ranks=runs/b2"

The game comes from the run's config.json (ALE/Breakout-v5 -> breakout); the published numbers from
hvd_dqn/baselines/dopamine_atari_cnn.json, with their source. Prints a Markdown table; --out draws the run's
per-window means over the published band(s); --json writes the table. --beside adds other runs of the game (the
same agent at another rank count, say) as columns of the table and lines of the plot; their cells hold the windows
they trained through to the end ("-" past a run's end).
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
    parser.add_argument("--beside", action="append", default=[], metavar="[LABEL=]LOGDIR",
                        help="Another run of the same game to set beside it (repeatable); LABEL defaults to the "
                             "folder's name.")
    args = parser.parse_args(argv)

    from hvd_dqn.envs import atari_game
    from hvd_dqn.reports.curves import CurveError, WindowMean, load_run, window_means
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
        beside = [_beside_run(argument, game, reference.window_env_steps) for argument in args.beside]
        # The table runs to the longest run's end: rows past this run's own are empty in its columns.
        width = reference.window_env_steps
        windows += [WindowMean(index * width, (index + 1) * width, 0, float("nan"), False)
                    for index in range(len(windows), max([len(run["mean_returns"]) for run in beside], default=0))]
    except (CurveError, ValueError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    label = args.label or os.path.basename(os.path.normpath(args.logdir))
    rows = table(windows, reference)
    print(markdown(rows, label, reference, beside))
    try:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(dict(run=label, logdir=args.logdir, env_id=run.env_id, game=game,
                               reference_agent=reference.agent, reference_source=reference.source, windows=rows,
                               beside=beside), handle, indent=2)
                handle.write("\n")
        if args.out:
            draw(rows, reference, others, label, args.out, beside)
            print(f"wrote {args.out}")
    except OSError as error:
        print(f"{PROGRAM}: error: cannot write ({error})", file=sys.stderr)
        return 2
    return 0


def _beside_run(argument: str, game: str, window_env_steps: int) -> dict:
    """--beside's `[label=]logdir`: that run's means over the windows it trained through, as a dict for the table,
    the plot and the JSON. A run of another game would compare nothing, so it is refused."""
    from hvd_dqn.envs import atari_game
    from hvd_dqn.reports.curves import CurveError, load_run, parse_curve_argument, window_means

    label, logdirs = parse_curve_argument(argument)
    if len(logdirs) != 1:
        raise CurveError(f"--beside={argument}: one logdir per --beside")
    other = (atari_game(load_run(logdirs[0]).env_id) or "").replace("_", "")
    if other != game:
        raise CurveError(f"--beside={argument}: a run of {other or 'a task that is not Atari'}, not of {game}")
    means = [round(window.mean_return, 3) if window.complete and window.episodes else None
             for window in window_means(logdirs[0], window_env_steps)]
    return dict(label=label, logdir=logdirs[0], mean_returns=means)


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


def markdown(rows, label, reference, beside=()) -> str:
    columns = "".join(f" {run['label']}: mean return |" for run in beside)
    lines = [f"| agent steps | {label}: episodes | {label}: mean return |{columns} Dopamine {reference.agent}: mean "
             f"[min, max] of {len(reference.seeds_by_window[0])} seeds |",
             "|---|---:|---:|" + "---:|" * len(beside) + "---|"]
    for index, row in enumerate(rows):
        steps = f"{row['start_env_steps'] / 1e3:,.0f}k-{row['end_env_steps'] / 1e3:,.0f}k"
        if not row["complete"]:
            steps += " (partial)"
        means = [row["mean_return"]] + [run["mean_returns"][index] if index < len(run["mean_returns"]) else None
                                        for run in beside]
        cells = " | ".join("-" if mean is None else f"{mean:.1f}" for mean in means)
        published = (f"{row['published_mean']:.1f} [{row['published_min']:.1f}, {row['published_max']:.1f}]"
                     if "published_mean" in row else "-")
        lines.append(f"| {steps} | {row['episodes']} | {cells} | {published} |")
    return "\n".join(lines)


def draw(rows, reference, others, label, path, beside=()) -> None:
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
    for index, run in enumerate(beside):
        points = [(row, mean) for row, mean in zip(rows, run["mean_returns"]) if mean is not None]
        axes.plot([(row["start_env_steps"] + row["end_env_steps"]) / 2 for row, _ in points],
                  [mean for _, mean in points], "s--", color=f"C{len(others) + 2 + index}", label=run["label"])
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
