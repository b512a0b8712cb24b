"""Seconds and env steps to a score, side by side on one machine and one core each: hvd_dqn's PQN, hvd_dqn's DQN
and (on CartPole) CleanRL's pqn.py, seed by seed, the order of the three turned round from one seed to the next;
and hvd_dqn's QR-DQN beside Dopamine's own on Atari Breakout.

    .venv/bin/python studies/pqn_side_by_side.py --task=cartpole --seeds=1,2,3,4,5 \
        --peer_python=PEERS/cleanrl/bin/python --cleanrl_dir=CLEANRL --workdir=runs/side_by_side \
        --out=results/pqn_side_by_side/cartpole
    .venv/bin/python studies/pqn_side_by_side.py --task=minatar_breakout --seeds=1,2,3 \
        --workdir=runs/side_by_side --out=results/pqn_side_by_side/minatar_breakout
    .venv/bin/python studies/pqn_side_by_side.py --task=atari_pong --seeds=0 --concurrent \
        --peer_python=PEERS/cleanrl_atari/bin/python --cleanrl_dir=CLEANRL --workdir=runs/side_by_side \
        --out=results/pqn_side_by_side/atari_pong
    .venv/bin/python studies/pqn_side_by_side.py --task=atari_breakout_qrdqn --seeds=0 --concurrent \
        --peer_python=PEERS/dopamine/bin/python --dopamine_dir=DOPAMINE --workdir=runs/side_by_side \
        --out=results/dopamine_side_by_side/breakout_qrdqn

CleanRL runs in an environment of its own, outside hvd_dqn's venv (hvd_dqn does not depend on torch):
`bash studies/peer_venv.sh PEERS/cleanrl` makes it, and CLEANRL is a clone of github.com/vwxyzjn/cleanrl (the
commit is recorded with each run). Its script runs unchanged, through studies/peer_episodes.py, which writes
its episodes as hvd_dqn does and stops it once solved.

Every run is bound to one core (taskset), with one thread for its maths (hvd_dqn: --cores_per_rank=1; torch:
OMP_NUM_THREADS=1). By default the runs take turns on core 0, the other core left idle; with --concurrent a
seed's configurations run at the same time, each on a core of its own (which one turned round from seed to
seed), so each has the other as its only neighbour.

Atari Pong (--task=atari_pong) runs CleanRL's pqn_atari_envpool.py for its full budget and hvd_dqn's Atari PQN
preset with CleanRL's emulator settings (envpool's defaults there: no sticky actions, up to 30 no-op starts,
FIRE pressed at reset, a lost life ends the episode for learning, 27,000 agent steps at most; returns of the
full game reported raw), both for 1M agent steps with their schedules over that budget. It has no single
target: the report gives each run's mean return per 100k agent steps and the seconds at which the mean of 20
consecutive episodes (CleanRL's own avg_episodic_return) first reaches each of a ladder of returns.

Atari Breakout with QR-DQN (--task=atari_breakout_qrdqn) runs Dopamine's own JAX QR-DQN (dopamine-rl 4.1.2 in a
venv of its own: `bash studies/peer_venv.sh PEERS/dopamine dopamine`; DOPAMINE is a clone of
github.com/google/dopamine, for its quantile.gin, which the wheel does not ship) through
studies/dopamine_episodes.py, against `configs/breakout_qrdqn.flags`, the same preset, both for --agent_steps
agent steps (20k of them before learning starts), reported as the Pong task is, with each run's agent steps per
second over the steps after learning began. JAX's CPU backend gets one thread (XLA_FLAGS) besides the taskset.

"Seconds" are seconds of training from each run's own clock,
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

from hvd_dqn.reports.score import episode_at_target, read_run  # noqa: E402

TASKS = {
    "cartpole": dict(target=475.0, configs=("cleanrl_pqn", "hvd_dqn_pqn", "hvd_dqn_dqn"),
                     presets={"hvd_dqn_pqn": "configs/cartpole_pqn.flags", "hvd_dqn_dqn": "configs/cartpole.flags"},
                     extra=[], peer=["pqn.py"]),
    # CleanRL's envpool settings on hvd_dqn's side; no evaluation, which CleanRL's script does not do either
    "atari_pong": dict(target=None, ladder=(-20.0, -15.0, -10.0, -5.0, 0.0, 5.0, 10.0, 15.0), window=20,
                       configs=("cleanrl_pqn", "hvd_dqn_pqn"), presets={"hvd_dqn_pqn": "configs/pong_pqn.flags"},
                       extra=["--repeat_action_probability=0", "--noop_max=30", "--fire_reset",
                              "--eval_interval_env_steps=0"],
                       peer=["pqn_atari_envpool.py", "--env-id=Pong-v5", "--total-timesteps=1000000"],
                       labels={"cleanrl_pqn": "CleanRL pqn_atari_envpool.py (torch, envpool)",
                               "hvd_dqn_pqn": "hvd_dqn --flagfile=configs/pong_pqn.flags, CleanRL's emulator"}),
    # MinAtar has no CleanRL script; both presets stop at the target as the CartPole presets do
    "minatar_breakout": dict(target=5.0, configs=("hvd_dqn_pqn", "hvd_dqn_dqn"),
                             presets={"hvd_dqn_pqn": "configs/minatar_pqn.flags",
                                      "hvd_dqn_dqn": "configs/minatar.flags"},
                             extra=["--env_id=MinAtar/Breakout-v0", "--stop_at_train_return=5",
                                    "--stop_train_episodes=100"]),
}
TASKS["atari_breakout_qrdqn"] = dict(
    target=None, ladder=(1.0, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0), window=20, learning_starts=20_000,
    configs=("dopamine_qrdqn", "hvd_dqn_qrdqn"), presets={"hvd_dqn_qrdqn": "configs/breakout_qrdqn.flags"},
    extra=["--eval_interval_env_steps=0", "--checkpoint_interval_env_steps=0"],
    peer=["dopamine/jax/agents/quantile/configs/quantile.gin",
          "atari_lib.create_atari_environment.game_name = 'Breakout'", "Runner.num_iterations = 1"],
    labels={"dopamine_qrdqn": "Dopamine's JAX QR-DQN (quantile.gin)",
            "hvd_dqn_qrdqn": "hvd_dqn --flagfile=configs/breakout_qrdqn.flags"})
LABELS = {"cleanrl_pqn": "CleanRL pqn.py (torch)", "hvd_dqn_pqn": "hvd_dqn --agent=pqn",
          "hvd_dqn_dqn": "hvd_dqn DQN (default agent)"}
# The configurations that run another project's code in its own venv, and that project's name.
PEERS = {"cleanrl_pqn": "cleanrl", "dopamine_qrdqn": "dopamine"}
WINDOW = 100


def git_commit(path: str) -> str:
    done = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def label(task: dict, config: str) -> str:
    return task.get("labels", {}).get(config) or LABELS[config]


def command_for(config: str, task: dict, seed: int, logdir: str, args) -> list:
    if config == "dopamine_qrdqn":
        gin, *bindings = task["peer"]
        bindings += [f"Runner.training_steps = {args.agent_steps}", f"JaxQuantileAgent.seed = {seed}"]
        return [args.peer_python, os.path.join(REPO, "studies", "dopamine_episodes.py"),
                f"--out={os.path.join(logdir, 'episodes.csv')}", "--", f"--base_dir={os.path.join(logdir, 'dopamine')}",
                f"--gin_files={os.path.join(args.dopamine_dir, gin)}",
                *(f"--gin_bindings={binding}" for binding in bindings)]
    if config == "cleanrl_pqn":
        stop = [] if task["target"] is None else [f"--target={task['target']:g}", f"--window={WINDOW}"]
        script, *script_args = task["peer"]
        return [args.peer_python, os.path.join(REPO, "studies", "peer_episodes.py"),
                f"--out={os.path.join(logdir, 'episodes.csv')}", *stop, "--",
                os.path.join(args.cleanrl_dir, "cleanrl", script), *script_args, f"--seed={seed}", "--no-cuda"]
    budget = [f"--total_env_steps={args.agent_steps}"] if "learning_starts" in task else []
    return [sys.executable, "-m", "hvd_dqn.train", f"--flagfile={os.path.join(REPO, task['presets'][config])}",
            f"--seed={seed}", "--cores_per_rank=1", f"--logdir={logdir}", *task["extra"], *budget]


def public_command(command: list, args) -> list:
    """The command as run, with this machine's folders named by their roles."""
    places = [(REPO + "/", ""), (os.path.abspath(args.workdir), "WORKDIR")]
    if args.peer_python:
        places.append((args.peer_python, "PEER_VENV/bin/python"))
    if args.cleanrl_dir:
        places.append((os.path.abspath(args.cleanrl_dir), "CLEANRL"))
    if args.dopamine_dir:
        places.append((os.path.abspath(args.dopamine_dir), "DOPAMINE"))
    named = []
    for part in command:
        for place, role in places:
            part = part.replace(place, role)
        named.append(part)
    return named


def start_one(config: str, task: dict, seed: int, core: int, args):
    """Starts one run bound to `core`; None if its evidence is already kept."""
    evidence = f"{args.out}_runs/{config}_seed{seed}"
    if os.path.exists(os.path.join(evidence, "run.json")):
        print(f"kept: {evidence}", flush=True)
        return None
    logdir = os.path.abspath(os.path.join(args.workdir, f"{config}_seed{seed}"))
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    # hvd_dqn takes its core from the affinity it inherits (--cores_per_rank=1); torch's threads are bound by it
    command = ["taskset", "-c", str(core), *command_for(config, task, seed, logdir, args)]
    environment = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if PEERS.get(config) == "dopamine":  # JAX on the CPU with one thread for its maths, as torch's and hvd_dqn's
        environment.update(JAX_PLATFORMS="cpu",
                           XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    print(f"{config} seed {seed}: {' '.join(command)}", flush=True)
    log = open(logdir + ".log", "w")
    process = subprocess.Popen(command, cwd=logdir if config in PEERS else REPO, env=environment,
                               stdout=log, stderr=subprocess.STDOUT)
    return dict(config=config, seed=seed, core=core, command=command, logdir=logdir, evidence=evidence,
                process=process, log=log, start=time.time())


def finish_one(run: dict, args) -> None:
    """Waits for a run started by start_one and keeps its evidence with its provenance."""
    config, seed, logdir, evidence, command = (run[key] for key in ("config", "seed", "logdir", "evidence", "command"))
    returncode = run["process"].wait()
    seconds = time.time() - run["start"]
    run["log"].close()
    if returncode != 0:
        raise SystemExit(f"{config} seed {seed} failed (exit {returncode}); see {logdir}.log")
    shutil.rmtree(evidence, ignore_errors=True)
    os.makedirs(evidence)
    for name in ("episodes.csv", "metrics.csv", "config.json"):
        if os.path.exists(os.path.join(logdir, name)):
            shutil.copyfile(os.path.join(logdir, name), os.path.join(evidence, name))
    provenance = dict(config=config, seed=seed, command=public_command(command, args), core=run["core"],
                      concurrent=args.concurrent, process_seconds=round(seconds, 1), hvd_dqn_commit=git_commit(REPO),
                      machine=platform.node(), finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if config in PEERS:
        provenance[f"{PEERS[config]}_commit"] = git_commit(getattr(args, f"{PEERS[config]}_dir"))
        provenance["peer_packages"] = subprocess.run([args.peer_python, "-m", "pip", "freeze"], capture_output=True,
                                                     text=True).stdout.split()
    with open(os.path.join(evidence, "run.json"), "w") as handle:
        json.dump(provenance, handle, indent=2)
        handle.write("\n")


def peer_episodes(path: str):
    import csv

    with open(path) as handle:
        return [(int(row["env_steps"]), float(row["return"]), float(row["wall_s"])) for row in csv.DictReader(handle)]


def kept_runs(task: dict, seeds, out: str):
    """(config, seed, episodes) of every run whose evidence is kept, episodes as (env_steps, return, wall_s)."""
    for config in task["configs"]:
        for seed in seeds:
            evidence = f"{out}_runs/{config}_seed{seed}"
            if os.path.exists(os.path.join(evidence, "run.json")):
                yield config, seed, (peer_episodes(os.path.join(evidence, "episodes.csv")) if config in PEERS
                                     else read_run(evidence, log_hint=False)[1])


def report(task_name: str, task: dict, seeds, out: str) -> dict:
    records = []
    for config, seed, episodes in kept_runs(task, seeds, out):
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
        summary.append(dict(config=config, label=label(task, config), runs=len(runs), reached=len(reached),
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


def ladder_record(config: str, seed: int, episodes, task: dict) -> dict:
    """One run on a task without a single target: its mean return per 100k agent steps and when the mean of
    `window` consecutive episodes first reached each return of the ladder."""
    episodes = sorted((int(steps), float(value), float(wall)) for steps, value, wall in episodes)
    per_100k = []
    for start in range(0, max(steps for steps, _, _ in episodes), 100_000):
        values = [value for steps, value, _ in episodes if start < steps <= start + 100_000]
        per_100k.append(round(statistics.mean(values), 2) if values else None)
    rungs = {}
    for rung in task["ladder"]:
        reached = episode_at_target(episodes, rung, task["window"])
        rungs[f"{rung:g}"] = None if reached is None else dict(env_steps=reached[0], wall_s=round(reached[2], 1))
    last_steps, _, last_wall = episodes[-1]
    record = dict(config=config, seed=seed, episodes=len(episodes), last_episode_env_steps=last_steps,
                  last_episode_wall_s=round(last_wall, 1), env_steps_per_s=round(last_steps / last_wall),
                  mean_return_per_100k=per_100k, rungs=rungs)
    if "learning_starts" in task:  # the rate while learning: from the first episode that ended after its start
        first_steps, _, first_wall = next(episode for episode in episodes if episode[0] > task["learning_starts"])
        record["learning_env_steps_per_s"] = round((last_steps - first_steps) / (last_wall - first_wall), 1)
        record["learning_span_env_steps"] = [first_steps, last_steps]
    return record


def report_ladder(task_name: str, task: dict, seeds, out: str) -> dict:
    """The report of a task without a single target (Atari): return by 100k steps and time to each rung, and
    hvd_dqn's time over the peer's at each rung both reached (medians over seeds)."""
    peer = next(config for config in task["configs"] if config in PEERS)
    ours = next(config for config in task["configs"] if config not in PEERS)
    records, curves = [], {}
    for config, seed, episodes in kept_runs(task, seeds, out):
        records.append(ladder_record(config, seed, episodes, task))
        curves[f"{config}_seed{seed}"] = episodes
    ratios = []
    for rung in task["ladder"]:
        seconds = {}
        for config in task["configs"]:
            times = [r["rungs"][f"{rung:g}"]["wall_s"] for r in records
                     if r["config"] == config and r["rungs"][f"{rung:g}"] is not None]
            runs = sum(1 for r in records if r["config"] == config)
            seconds[config] = statistics.median(times) if times and len(times) == runs else None
        if all(seconds.values()) and len(seconds) == 2:
            ratios.append(dict(rung=rung, **{f"{c}_wall_s": v for c, v in seconds.items()},
                               **{f"hvd_dqn_over_{PEERS[peer]}": round(seconds[ours] / seconds[peer], 3)}))
    study = dict(task=task_name, window=task["window"], ladder=list(task["ladder"]), seeds=list(seeds),
                 labels={config: label(task, config) for config in task["configs"]}, runs=records,
                 time_ratio_by_rung=ratios)
    with open(out + ".json", "w") as handle:
        json.dump(study, handle, indent=2)
        handle.write("\n")
    draw_curves(study, curves, out + ".png")
    for record in records:
        learning = (f" ({record['learning_env_steps_per_s']} while learning)" if "learning_env_steps_per_s" in record
                    else "")
        print(f"{record['config']} seed {record['seed']}: {record['env_steps_per_s']} agent steps/s{learning}, per "
              f"100k {record['mean_return_per_100k']}")
    for row in ratios:
        print(f"mean of {task['window']} >= {row['rung']:g}: hvd_dqn / {PEERS[peer]} seconds = "
              f"{row[f'hvd_dqn_over_{PEERS[peer]}']}")
    return study


def draw_curves(study: dict, curves: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = study["window"]
    figure, panels = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    for index, (name, episodes) in enumerate(sorted(curves.items())):
        episodes = sorted(episodes)
        values = [value for _, value, _ in episodes]
        means = [statistics.mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]
        config = name.rsplit("_seed", 1)[0]
        for panel, axis in ((panels[0], 2), (panels[1], 0)):
            panel.plot([episode[axis] for episode in episodes], means, color=f"C{index}",
                       label=f"{study['labels'][config]}, seed {name.rsplit('_seed', 1)[1]}")
    panels[0].set_xlabel("seconds of training (one core)")
    panels[1].set_xlabel("agent steps")
    for panel in panels:
        panel.set_ylabel(f"mean return of {window} training episodes")
        panel.grid(alpha=0.3)
    panels[0].legend(fontsize="small")
    figure.suptitle(f"{study['task']}: side by side, one core each")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


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
    parser.add_argument("--peer_python", help="the Python of the peer's own venv (studies/peer_venv.sh)")
    parser.add_argument("--cleanrl_dir", help="a clone of github.com/vwxyzjn/cleanrl")
    parser.add_argument("--dopamine_dir", help="a clone of github.com/google/dopamine (for its gin files)")
    parser.add_argument("--agent_steps", type=int, default=70_000,
                        help="Atari Breakout with QR-DQN: agent steps of each run (learning starts at 20k)")
    parser.add_argument("--workdir", default="runs/side_by_side", help="the runs' logdirs (outside git)")
    parser.add_argument("--out", required=True, help="writes OUT.json, OUT.png and OUT_runs/")
    parser.add_argument("--report_only", action="store_true")
    parser.add_argument("--concurrent", action="store_true",
                        help="run a seed's configurations at the same time, each on a core of its own")
    args = parser.parse_args()
    task = TASKS[args.task]
    # the peer runs in its own folder, so its Python and CleanRL's clone are named absolutely
    args.peer_python = args.peer_python and os.path.abspath(args.peer_python)
    args.cleanrl_dir = args.cleanrl_dir and os.path.abspath(args.cleanrl_dir)
    args.dopamine_dir = args.dopamine_dir and os.path.abspath(args.dopamine_dir)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if not args.report_only:
        for config in task["configs"]:
            peer = PEERS.get(config)
            if peer and not (args.peer_python and getattr(args, f"{peer}_dir")):
                parser.error(f"--task={args.task} runs {peer} too: give --peer_python and --{peer}_dir")
        os.makedirs(args.workdir, exist_ok=True)
        configs = list(task["configs"])
        cores = sorted(os.sched_getaffinity(0))
        if args.concurrent and len(cores) < len(configs):
            parser.error(f"--concurrent needs a core per configuration ({len(configs)}); this process has {len(cores)}")
        for turn, seed in enumerate(seeds):  # the order (or, run concurrently, the cores) turns round per seed
            order = configs[turn % len(configs):] + configs[:turn % len(configs)]
            if args.concurrent:
                started = [start_one(config, task, seed, cores[index], args) for index, config in enumerate(order)]
                try:
                    for run in started:
                        if run is not None:
                            finish_one(run, args)
                finally:  # one failed: stop its neighbour rather than leave it running unwatched
                    for run in started:
                        if run is not None and run["process"].poll() is None:
                            run["process"].terminate()
                continue
            for config in order:
                run = start_one(config, task, seed, cores[0], args)
                if run is not None:
                    finish_one(run, args)
    (report if task["target"] is not None else report_ladder)(args.task, task, seeds, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
