"""A suite of Atari runs against Dopamine's published agents, game by game and agent by agent, from the runs' raw
episodes:

    .venv/bin/python -m hvd_dqn.reports.suite results/breakout_pqn results/atari/*_seed* --out=results/atari/suite

Each run is named by its agent (config.json: DQN, QR-DQN, IQN, C51, Rainbow for C51 with n-step returns and
prioritised replay, full Rainbow with noisy networks, PQN) and compared in its window: the last of Dopamine's
250,000-agent-step iterations its --total_env_steps completes (750k-1M for a 1M run, 250k-500k for 500k), or
--window for all. For each game and agent: the mean training return of the runs' episodes that ended in the
window, per seed and over the seeds, beside the mean [min, max] over 5 seeds of Dopamine's same agent
(hvd_dqn/baselines/dopamine_atari_cnn.json) and of its DQN and Rainbow; whether the mean is within or above the
range of Dopamine's same agent, and above its DQN; and each run's agent steps per second of training (its env
steps over its seconds of training, from episodes.csv's wall_s; a run that shared its machine says so only
through a lower figure). Then, per game, hvd_dqn's best agent in the game's latest window, placed among the means
of all five of Dopamine's agents (DQN, C51, Rainbow, QR-DQN, IQN) there: the line a user choosing an agent for a
game reads first. Writes OUT.md (the tables), OUT.json and OUT.png (one panel per game: each run's
per-window means over the bands of Dopamine's same agent and its DQN).
"""
import argparse
import collections
import json
import math
import os
import sys

PROGRAM = "python -m hvd_dqn.reports.suite"
REFERENCES = ("DQN", "Rainbow")  # Dopamine's agents every row is also set beside
DOPAMINE_AGENTS = ("DQN", "C51", "Rainbow", "QR-DQN", "IQN")  # all Dopamine publishes per game
ITERATION = 250_000  # agent steps per Dopamine iteration


class SuiteError(Exception):
    pass


def run_summary(logdir: str, window) -> dict:
    """One run: its game, agent, seed, per-window means (Dopamine's windows), its window's mean and its speed."""
    from hvd_dqn.agent.registry import dopamine_counterpart
    from hvd_dqn.baselines import dopamine_curve
    from hvd_dqn.envs import atari_game
    from hvd_dqn.reports.curves import CurveError, load_run, window_means

    try:
        run = load_run(logdir)
        with open(os.path.join(logdir, "config.json")) as handle:
            config = json.load(handle)
    except (CurveError, OSError, ValueError) as error:
        raise SuiteError(f"{logdir}: {error}") from None
    game = atari_game(run.env_id)
    if game is None:
        raise SuiteError(f"{logdir}: env_id {run.env_id!r} is not an Atari game")
    game = game.replace("_", "")  # ale-py's space_invaders is Dopamine's spaceinvaders
    window_env_steps = dopamine_curve(game).window_env_steps
    if window is None:  # the last window the run's budget completes
        window = max(0, int(config.get("total_env_steps", 4 * window_env_steps)) // window_env_steps - 1)
    windows = window_means(logdir, window_env_steps)
    if len(windows) <= window or not windows[window].complete:
        raise SuiteError(f"{logdir}: the run did not reach the end of window {window} "
                         f"({(window + 1) * window_env_steps:,} agent steps)")
    label, counterpart = dopamine_counterpart(config)
    # Agent steps per second of training: the last episode's end over its seconds of training (resumes included).
    steps = run.episode_frames / run.frames_per_step
    seconds = float(run.episode_wall_s[-1]) if len(run.episode_wall_s) else float("nan")
    return dict(logdir=logdir, game=game, env_id=run.env_id, seed=config.get("seed", 0),
                agent=config.get("agent", "dqn"), label=label, dopamine_agent=counterpart, window=window,
                window_means=[None if math.isnan(w.mean_return) else round(w.mean_return, 3) for w in windows],
                mean=round(windows[window].mean_return, 3), episodes=windows[window].episodes,
                agent_steps_per_s=round(float(steps[-1]) / seconds, 1) if seconds == seconds and seconds > 0 else None)


def _published(game: str, agent: str, window: int) -> dict:
    from hvd_dqn.baselines import dopamine_curve

    curve = dopamine_curve(game, agent)
    return dict(mean=round(curve.mean(window), 3), low=round(curve.low(window), 3), high=round(curve.high(window), 3))


def suite(logdirs, window=None) -> dict:
    """The table's rows, one per game and agent (games in the order their first run came), and each agent's tally."""
    runs = [run_summary(logdir, window) for logdir in logdirs]
    groups = collections.OrderedDict()
    for run in runs:
        groups.setdefault((run["game"], run["label"]), []).append(run)
    games = list(collections.OrderedDict.fromkeys(run["game"] for run in runs))
    rows = []
    for (game, label), group in sorted(groups.items(), key=lambda item: (games.index(item[0][0]), item[0][1])):
        windows = {run["window"] for run in group}
        if len(windows) > 1:
            raise SuiteError(f"{label} on {game}: runs of different windows ({', '.join(map(str, sorted(windows)))}); "
                             "give --window to compare them in one")
        row_window = windows.pop()
        means = [run["mean"] for run in group]
        row = dict(game=game, label=label, window=row_window, seeds=[run["seed"] for run in group], means=means,
                   mean=round(sum(means) / len(means), 3), low=min(means), high=max(means),
                   agent_steps_per_s=[run["agent_steps_per_s"] for run in group],
                   dopamine_agent=group[0]["dopamine_agent"],
                   dopamine={agent: _published(game, agent, row_window) for agent in REFERENCES})
        same = row["dopamine_agent"]
        if same is not None:
            row["dopamine"].setdefault(same, _published(game, same, row_window))
            row["within_or_above_same"] = row["mean"] >= row["dopamine"][same]["low"]
        row["above_dqn"] = row["mean"] > row["dopamine"]["DQN"]["mean"]
        row["above_rainbow"] = row["mean"] > row["dopamine"]["Rainbow"]["mean"]
        rows.append(row)
    tallies = collections.OrderedDict()
    for row in rows:
        tally = tallies.setdefault(row["label"], dict(games=0, above_dqn=0, above_rainbow=0, dopamine_agent=None,
                                                      within_or_above_same=0))
        tally["games"] += 1
        tally["above_dqn"] += row["above_dqn"]
        tally["above_rainbow"] += row["above_rainbow"]
        if row["dopamine_agent"] is not None:
            tally["dopamine_agent"] = row["dopamine_agent"]
            tally["within_or_above_same"] += row["within_or_above_same"]
    return dict(rows=rows, runs=runs, agents=tallies, best=best_per_game(rows))


def best_per_game(rows) -> list:
    """Per game, hvd_dqn's best agent, placed among all of Dopamine's agents in the same window.

    Only the game's latest window is compared (a 500k run's 250k-500k mean is not set against a 1M run's
    750k-1M), and the agents by their means over their seeds, as Dopamine's are by the means of theirs."""
    best = []
    for game in collections.OrderedDict.fromkeys(row["game"] for row in rows):
        latest = max(row["window"] for row in rows if row["game"] == game)
        top = max((row for row in rows if row["game"] == game and row["window"] == latest), key=lambda row: row["mean"])
        dopamine = {agent: _published(game, agent, latest)["mean"] for agent in DOPAMINE_AGENTS}
        ranked = sorted(dopamine.items(), key=lambda item: item[1])
        best.append(dict(game=game, window=latest, label=top["label"], mean=top["mean"], dopamine_means=dopamine,
                         above=[agent for agent, mean in ranked if top["mean"] > mean],
                         below=[agent for agent, mean in ranked if top["mean"] <= mean]))
    return best


def _window_text(window: int) -> str:
    start, end = window * ITERATION, (window + 1) * ITERATION
    return "-".join(f"{value // 1_000_000}M" if value and value % 1_000_000 == 0 else f"{value // 1000}k"
                    for value in (start, end))


def _published_text(value) -> str:
    return f"{value['mean']:,.1f} [{value['low']:,.1f}, {value['high']:,.1f}]"


def _named_means(agents, best: dict) -> str:
    """'DQN 18.5, IQN 23.7': Dopamine's agents with their means in the window of `best` (a best_per_game row)."""
    return ", ".join(f"{agent} {best['dopamine_means'][agent]:,.1f}" for agent in agents) or "none"


def markdown(result: dict) -> str:
    lines = ["Mean training return over each run's window of agent steps (Dopamine's iterations of 250k); Dopamine's "
             "agents: mean [min, max] of 5 seeds in the same window.", "",
             "| game | agent | window | seeds | mean [min, max] | Dopamine's same agent | within or above its range "
             "| Dopamine DQN | Dopamine Rainbow | above DQN | agent steps/s |",
             "|---|---|---|---:|---|---|:---:|---|---|:---:|---|"]
    for row in result["rows"]:
        ours = f"**{row['mean']:,.1f}**" + (f" [{row['low']:,.1f}, {row['high']:,.1f}]" if len(row["means"]) > 1
                                             else "")
        same = row["dopamine_agent"]
        same_text = f"{same}: {_published_text(row['dopamine'][same])}" if same else "none published"
        within = ("yes" if row["within_or_above_same"] else "no") if same else "-"
        speeds = ", ".join("-" if speed is None else f"{speed:,.0f}" for speed in row["agent_steps_per_s"])
        lines.append(f"| {row['game']} | {row['label']} | {_window_text(row['window'])} | {len(row['means'])} | "
                     f"{ours} | {same_text} | {within} | {_published_text(row['dopamine']['DQN'])} | "
                     f"{_published_text(row['dopamine']['Rainbow'])} | {'yes' if row['above_dqn'] else 'no'} | "
                     f"{speeds} |")
    lines.append("")
    for label, tally in result["agents"].items():
        games = tally["games"]
        text = f"{label}: above Dopamine's DQN on {tally['above_dqn']} of {games} games"
        if tally["dopamine_agent"] is not None:
            text += (f", within or above the range of Dopamine's {tally['dopamine_agent']} on "
                     f"{tally['within_or_above_same']} of {games}.")
        else:
            text += f", above its Rainbow on {tally['above_rainbow']} of {games}."
        lines.append(text)
    lines += ["", "hvd_dqn's best agent on each game (its latest window), among the means of Dopamine's five agents in "
              "the same window:", "",
              "| game | window | best hvd_dqn agent | mean | above Dopamine's | below Dopamine's |",
              "|---|---|---|---:|---|---|"]
    for best in result["best"]:
        lines.append(f"| {best['game']} | {_window_text(best['window'])} | {best['label']} | {best['mean']:,.1f} | "
                     f"{_named_means(best['above'], best)} | {_named_means(best['below'], best)} |")
    return "\n".join(lines)


def draw(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hvd_dqn.baselines import dopamine_curve
    from hvd_dqn.reports.curves import save_figure

    games = list(collections.OrderedDict.fromkeys(row["game"] for row in result["rows"]))
    labels = list(result["agents"])
    colors = {label: f"C{index}" for index, label in enumerate(labels)}
    columns = min(3, len(games))
    lines = math.ceil(len(games) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.2 * lines), dpi=110, squeeze=False)
    for panel, game in zip(axes.flat, games):
        rows = [row for row in result["rows"] if row["game"] == game]
        last_window = max(row["window"] for row in rows) + 1
        # The bands: Dopamine's DQN (grey) and, in each agent's colour, Dopamine's same agent.
        bands = [("DQN", "0.5")] + [(row["dopamine_agent"], colors[row["label"]]) for row in rows
                                     if row["dopamine_agent"] not in (None, "DQN")]
        for agent, color in bands:
            curve = dopamine_curve(game, agent)
            middles = [(i + 0.5) * curve.window_env_steps / 1e6 for i in range(last_window)]
            panel.plot(middles, [curve.mean(i) for i in range(last_window)], "--", color=color, linewidth=1,
                       label=f"Dopamine {agent}")
            panel.fill_between(middles, [curve.low(i) for i in range(last_window)],
                               [curve.high(i) for i in range(last_window)], color=color, alpha=0.15, linewidth=0)
        for row in rows:
            game_runs = [run for run in result["runs"] if run["game"] == game and run["label"] == row["label"]]
            for marker, run in zip("os^vD", game_runs):
                means = run["window_means"][:row["window"] + 1]
                panel.plot([(i + 0.5) * ITERATION / 1e6 for i in range(len(means))], means, f"{marker}-",
                           color=colors[row["label"]], linewidth=1.5, alpha=0.9,
                           label=f"hvd_dqn {row['label']}" + (f", seed {run['seed']}" if len(game_runs) > 1 else ""))
        panel.set_title(game)
        panel.grid(alpha=0.3)
        panel.set_xlabel("agent steps (M)")
        panel.legend(fontsize="xx-small", loc="upper left")
    for panel in list(axes.flat)[len(games):]:
        panel.axis("off")
    axes.flat[0].set_ylabel("mean training return per 250k-step window")
    figure.suptitle("hvd_dqn's agents against Dopamine's published ones (dashed, bands: min-max of 5 seeds)")
    save_figure(figure, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdirs", nargs="+", help="Runs: hvd_dqn.train --logdir folders or results/ folders.")
    parser.add_argument("--window", type=int, default=None,
                        help="Dopamine's iteration to compare every run in (3: 750k-1M); by default each run's last.")
    parser.add_argument("--out", required=True, help="Writes OUT.md, OUT.json and OUT.png.")
    args = parser.parse_args(argv)
    try:
        if args.window is not None and args.window < 0:
            raise SuiteError(f"--window={args.window}: must be an iteration >= 0")
        result = suite(args.logdirs, args.window)
    except (SuiteError, ValueError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text)
    try:
        with open(args.out + ".md", "w") as handle:
            handle.write(text + "\n")
        with open(args.out + ".json", "w") as handle:
            json.dump(result, handle, indent=1)
            handle.write("\n")
        draw(result, args.out + ".png")
    except OSError as error:
        print(f"{PROGRAM}: error: cannot write {args.out}.* ({error})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from hvd_dqn.cli import exit_with

    exit_with(main)
