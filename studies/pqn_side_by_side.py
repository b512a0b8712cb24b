"""Seconds and env steps to a score, side by side on one machine and one core each: hvd_dqn's PQN, hvd_dqn's DQN
and (on CartPole) CleanRL's pqn.py, seed by seed, the order of the three turned round from one seed to the next.

    .venv/bin/python studies/pqn_side_by_side.py --task=cartpole --seeds=1,2,3,4,5 \
        --peer_python=PEERS/cleanrl/bin/python --cleanrl_dir=CLEANRL --workdir=runs/side_by_side \
        --out=results/pqn_side_by_side/cartpole
    .venv/bin/python studies/pqn_side_by_side.py --task=minatar_breakout --seeds=1,2,3 \
        --workdir=runs/side_by_side --out=results/pqn_side_by_side/minatar_breakout

CleanRL runs in an environment of its own, outside hvd_dqn's venv (hvd_dqn does not depend on torch):
`bash studies/peer_venv.sh PEERS/cleanrl` makes it, and CLEANRL is a clone of github.com/vwxyzjn/cleanrl (the
commit is recorded with each run). Its script runs unchanged, through studies/peer_episodes.py, which writes
its episodes as hvd_dqn does and stops it once solved.

Every run is bound to core 0 (taskset), with one thread for its maths (hvd_dqn: --cores_per_rank=1; torch:
OMP_NUM_THREADS=1), the other core left idle. "Seconds" are seconds of training from each run's own clock,
from its training loop's start, when the mean of 100 consecutive training episodes first reaches the target;
the medians are over seeds. Finished runs' evidence (episodes.csv; for hvd_dqn also metrics.csv and
config.json; run.json with the command, seed, commit and timing) is kept in OUT_runs/<config>_seed<seed>/ and
not run again, so the study can be stopped and continued; --report_only rewrites OUT.json and OUT.png from it."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hvd_dqn.tools.study_report import episode_at_target, read_run  # noqa: E402

TASKS = {
    "cartpole": dict(target=475.0, configs=("cleanrl_pqn", "hvd_dqn_pqn", "hvd_dqn_dqn"),
                     presets={"hvd_dqn_pqn": "configs/cartpole_pqn.flags", "hvd_dqn_dqn": "configs/cartpole.flags"},
                     extra=[]),
    # MinAtar has no CleanRL script; both presets stop at the target as the CartPole presets do
    "minatar_breakout": dict(target=5.0, configs=("hvd_dqn_pqn", "hvd_dqn_dqn"),
                             presets={"hvd_dqn_pqn": "configs/minatar_pqn.flags",
                                      "hvd_dqn_dqn": "configs/minatar.flags"},
                             extra=["--env_id=MinAtar/Breakout-v0", "--stop_at_train_return=5",
                                    "--stop_train_episodes=100"]),
}
LABELS = {"cleanrl_pqn": "CleanRL pqn.py (torch)", "hvd_dqn_pqn": "hvd_dqn --agent=pqn",
          "hvd_dqn_dqn": "hvd_dqn DQN (default agent)"}
WINDOW = 100


def git_commit(path: str) -> str:
    done = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def command_for(config: str, task: dict, seed: int, logdir: str, args) -> list:
    if config == "cleanrl_pqn":
        return [args.peer_python, os.path.join(REPO, "studies", "peer_episodes.py"),
                f"--out={os.path.join(logdir, 'episodes.csv')}", f"--target={task['target']:g}",
                f"--window={WINDOW}", "--", os.path.join(args.cleanrl_dir, "cleanrl", "pqn.py"),
                f"--seed={seed}", "--no-cuda"]
    return [sys.executable, "-m", "hvd_dqn.train", f"--flagfile={os.path.join(REPO, task['presets'][config])}",
            f"--seed={seed}", "--cores_per_rank=1", f"--logdir={logdir}", *task["extra"]]


def public_command(command: list, args) -> list:
    """The command as run, with this machine's folders named by their roles."""
    places = [(REPO + "/", ""), (os.path.abspath(args.workdir), "WORKDIR")]
    if args.peer_python:
        places.append((args.peer_python, "PEER_VENV/bin/python"))
    if args.cleanrl_dir:
        places.append((os.path.abspath(args.cleanrl_dir), "CLEANRL"))
    named = []
    for part in command:
        for place, role in places:
            part = part.replace(place, role)
        named.append(part)
    return named


def run_one(config: str, task: dict, seed: int, args) -> None:
    evidence = f"{args.out}_runs/{config}_seed{seed}"
    if os.path.exists(os.path.join(evidence, "run.json")):
        print(f"kept: {evidence}", flush=True)
        return
    logdir = os.path.abspath(os.path.join(args.workdir, f"{config}_seed{seed}"))
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    command = command_for(config, task, seed, logdir, args)
    environment = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if config == "cleanrl_pqn":  # hvd_dqn binds itself (--cores_per_rank=1); torch is bound from outside
        command = ["taskset", "-c", "0", *command]
    print(f"{config} seed {seed}: {' '.join(command)}", flush=True)
    start = time.time()
    with open(logdir + ".log", "w") as log:
        done = subprocess.run(command, cwd=logdir if config == "cleanrl_pqn" else REPO, env=environment,
                              stdout=log, stderr=subprocess.STDOUT)
    seconds = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"{config} seed {seed} failed (exit {done.returncode}); see {logdir}.log")
    shutil.rmtree(evidence, ignore_errors=True)
    os.makedirs(evidence)
    for name in ("episodes.csv", "metrics.csv", "config.json"):
        if os.path.exists(os.path.join(logdir, name)):
            shutil.copyfile(os.path.join(logdir, name), os.path.join(evidence, name))
    provenance = dict(config=config, seed=seed, command=public_command(command, args),
                      process_seconds=round(seconds, 1), hvd_dqn_commit=git_commit(REPO),
                      machine=platform.node(), finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if config == "cleanrl_pqn":
        provenance["cleanrl_commit"] = git_commit(args.cleanrl_dir)
        provenance["peer_packages"] = subprocess.run([args.peer_python, "-m", "pip", "freeze"], capture_output=True,
                                                     text=True).stdout.split()
    with open(os.path.join(evidence, "run.json"), "w") as handle:
        json.dump(provenance, handle, indent=2)
        handle.write("\n")


def peer_episodes(path: str):
    import csv

    with open(path) as handle:
        return [(int(row["env_steps"]), float(row["return"]), float(row["wall_s"])) for row in csv.DictReader(handle)]


def report(task_name: str, task: dict, seeds, out: str) -> dict:
    records = []
    for config in task["configs"]:
        for seed in seeds:
            evidence = f"{out}_runs/{config}_seed{seed}"
            if not os.path.exists(os.path.join(evidence, "run.json")):
                continue
            episodes = (peer_episodes(os.path.join(evidence, "episodes.csv")) if config == "cleanrl_pqn"
                        else read_run(evidence, log_hint=False)[1])
            reached = episode_at_target(episodes, task["target"], WINDOW)
            records.append(dict(config=config, seed=seed, episodes=len(episodes),
                                env_steps_to_target=None if reached is None else int(reached[0]),
                                wall_s_to_target=None if reached is None else round(float(reached[2]), 1),
                                env_steps_per_s_to_target=None if reached is None or not reached[2] else
                                round(reached[0] / reached[2])))
    summary = []
    for config in task["configs"]:
        runs = [record for record in records if record["config"] == config]
        reached = [record for record in runs if record["wall_s_to_target"] is not None]
        summary.append(dict(config=config, label=LABELS[config], runs=len(runs), reached=len(reached),
                            median_env_steps_to_target=statistics.median(r["env_steps_to_target"] for r in reached)
                            if reached else None,
                            median_wall_s_to_target=round(statistics.median(r["wall_s_to_target"] for r in reached), 1)
                            if reached else None,
                            median_env_steps_per_s_to_target=statistics.median(
                                r["env_steps_per_s_to_target"] for r in reached) if reached else None))
    study = dict(task=task_name, target=task["target"], window=WINDOW, seeds=list(seeds), runs=records,
                 summary=summary)
    with open(out + ".json", "w") as handle:
        json.dump(study, handle, indent=2)
        handle.write("\n")
    draw(study, out + ".png")
    for row in summary:
        print(f"{row['label']:32s} runs {row['runs']} reached {row['reached']}  median env steps "
              f"{row['median_env_steps_to_target']}  median seconds {row['median_wall_s_to_target']}")
    return study


def draw(study: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = [row["config"] for row in study["summary"]]
    figure, panels = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    for panel, key, label in ((panels[0], "wall_s_to_target", "seconds of training to the target (one core)"),
                              (panels[1], "env_steps_to_target", "env steps to the target")):
        for index, config in enumerate(configs):
            values = [record[key] for record in study["runs"] if record["config"] == config and record[key]]
            panel.plot([index] * len(values), values, "o", alpha=0.5, color=f"C{index}")
            if values:
                panel.plot([index - 0.2, index + 0.2], [statistics.median(values)] * 2, "-", color=f"C{index}")
        panel.set_xticks(range(len(configs)), [LABELS[config].replace(" (", "\n(") for config in configs],
                         fontsize="small")
        panel.set_ylabel(label)
        panel.set_ylim(bottom=0)
        panel.grid(alpha=0.3)
    figure.suptitle(f"{study['task']}: mean of {study['window']} training episodes >= {study['target']:g}, "
                    f"seeds {', '.join(map(str, study['seeds']))} (dots: runs, bars: medians)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--peer_python", help="the Python of CleanRL's own venv (studies/peer_venv.sh)")
    parser.add_argument("--cleanrl_dir", help="a clone of github.com/vwxyzjn/cleanrl")
    parser.add_argument("--workdir", default="runs/side_by_side", help="the runs' logdirs (outside git)")
    parser.add_argument("--out", required=True, help="writes OUT.json, OUT.png and OUT_runs/")
    parser.add_argument("--report_only", action="store_true")
    args = parser.parse_args()
    task = TASKS[args.task]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if not args.report_only:
        if "cleanrl_pqn" in task["configs"] and not (args.peer_python and args.cleanrl_dir):
            parser.error(f"--task={args.task} runs CleanRL too: give --peer_python and --cleanrl_dir")
        os.makedirs(args.workdir, exist_ok=True)
        configs = list(task["configs"])
        for turn, seed in enumerate(seeds):  # the order turns round: A B C, B C A, C A B, ...
            for config in configs[turn % len(configs):] + configs[:turn % len(configs)]:
                run_one(config, task, seed, args)
    report(args.task, task, seeds, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
