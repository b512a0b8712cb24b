"""Worker scaling measured the way users feel it: one preset trained by 1 worker and by N, every worker bound to
cores of its own, in alternating rounds on the same machine:

    python -m hvd_dqn.measure.benchmark_workers --flagfile=configs/cartpole.flags --workers=1,2 --json=workers.json \\
        [-- more hvd_dqn.train flags for every run, e.g. --rank_scaling=updates]

Each round trains every worker count once, from a fresh logdir (1 worker: `python -m hvd_dqn.train`; N: under
`horovodrun -np N`), with --cores_per_rank so the one-worker baseline has the same per-worker resources as each
of the N. A run stops --measure_env_steps after its replay memory is ready; its rate is read from its own
metrics.csv between the first log point with updates and the last (wall_time_s is the training loop's clock),
so start-up and the memory fill, which makes no updates, are left out. Reported, as medians over the rounds:
env_steps_per_s_<N>, updates_per_s_<N>, workers_speedup_<N> (the per-round ratio of N workers' env steps per
second to one worker's) and workers_efficiency_<N> (speed-up / N). Wall-time figures need the machine to
themselves: nothing else should run beside the benchmark.

With --corun each round also starts, for each N, N one-worker runs at once, each doing one rank's work on that
rank's cores and nothing linking them (hvd_dqn/measure/corun.py): corun_ceiling_<N> is N x the slowest one's
rate over one worker's, the speed-up the cores allow before any gradient is exchanged, and
share_of_ceiling_<N> the measured speed-up over it.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from hvd_dqn.config import ConfigError
from hvd_dqn.rank_split import learns_from_replay
from hvd_dqn.rank_split import env_steps_before_first_update, problem_with_runs, rank_learning_starts
from hvd_dqn.run import horovod_setup

PROGRAM = "hvd_dqn.measure.benchmark_workers"


class BenchmarkError(Exception):
    pass


def resolved_config(flagfile: str, train_flags):
    """The TrainConfig every run trains with; a bad flag is a BenchmarkError naming it, before anything runs."""
    from hvd_dqn.flags import config_of_runs

    try:
        return config_of_runs(PROGRAM, flagfile, train_flags)
    except ConfigError as error:
        raise BenchmarkError(f"the runs' flags: {error}") from None


def fill_env_steps(config, workers: int) -> int:
    """The job's env steps before the first update: every rank holds its --learning_starts transitions (its
    share of the job's, or its own with --counts_per_rank), all ranks filling alike. PQN (--agent=pqn) first
    updates once its first rollout is full."""
    return env_steps_before_first_update(config, workers)


def command_for(workers: int, args, logdir: str, total_env_steps: int, log_interval: int, train_flags) -> list:
    python = sys.executable
    train = [python, "-m", "hvd_dqn.train", f"--flagfile={args.flagfile}", f"--logdir={logdir}",
             f"--total_env_steps={total_env_steps}", f"--log_interval_env_steps={log_interval}",
             f"--checkpoint_interval_env_steps={total_env_steps}", "--eval_interval_env_steps=0",
             "--stop_at_train_return=inf", f"--cores_per_rank={args.cores_per_rank}", *train_flags]
    if workers == 1:
        return train
    horovodrun = os.path.join(os.path.dirname(python), "horovodrun")
    return [horovodrun if os.path.exists(horovodrun) else "horovodrun", "-np", str(workers),
            f"--{args.controller}", *train]


def measured_rates(metrics_path: str, untimed_tail: int = 0):
    """(env steps/s, updates/s, env steps measured) between the first metrics row with updates and the last
    (or, with `untimed_tail`, the last but that many)."""
    with open(metrics_path, newline="") as handle:
        rows = [row for row in csv.DictReader(handle)]
    learning = [row for row in rows if int(row["updates"]) > 0]
    learning = learning[:len(learning) - untimed_tail]
    if len(learning) < 2:
        raise BenchmarkError(f"{metrics_path}: fewer than two log points with updates; raise --measure_env_steps")
    first, last = learning[0], learning[-1]
    seconds = float(last["wall_time_s"]) - float(first["wall_time_s"])
    env_steps = int(last["env_steps"]) - int(first["env_steps"])
    updates = int(last["updates"]) - int(first["updates"])
    return env_steps / seconds, updates / seconds, env_steps


def run_length(fill: int, measure_env_steps: int, log_points: int, untimed_intervals: int = 0):
    """(log interval, total env steps) of a run timed over `measure_env_steps` in `log_points` intervals from the
    first log point after its memory fill of `fill` env steps (the first with updates), then running
    `untimed_intervals` more."""
    log_interval = max(1, measure_env_steps // log_points)
    first_learning_log = (fill // log_interval + 1) * log_interval
    return log_interval, first_learning_log + log_interval * (log_points + untimed_intervals)


def run_once(workers: int, round_index: int, args, config, train_flags) -> dict:
    logdir = os.path.join(args.workdir, f"workers{workers}_round{round_index}")
    shutil.rmtree(logdir, ignore_errors=True)
    log_interval, total = run_length(fill_env_steps(config, workers), args.measure_env_steps, args.log_points)
    if args.job_num_envs is not None:
        train_flags = [*train_flags, f"--num_envs={args.job_num_envs // workers}"]
    command = command_for(workers, args, logdir, total, log_interval, train_flags)
    os.makedirs(args.workdir, exist_ok=True)
    with open(logdir + ".log", "w") as log:
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                                env=horovod_setup.launcher_environment()).returncode
    if status != 0:
        raise BenchmarkError(f"{workers} worker(s), round {round_index + 1}: hvd_dqn.train exited with status "
                             f"{status}; see {logdir}.log")
    env_steps_per_s, updates_per_s, measured = measured_rates(os.path.join(logdir, "metrics.csv"))
    return dict(workers=workers, round=round_index, env_steps_per_s=env_steps_per_s, updates_per_s=updates_per_s,
                measured_env_steps=measured, logdir=logdir)


def corun_flags(config, workers: int, job_num_envs) -> list:
    """The flags that make a one-worker run do one rank's work of `workers` (measure/corun.py), or why not."""
    from hvd_dqn.measure import corun

    if not learns_from_replay(config):
        raise BenchmarkError("--corun: not yet available with --agent=pqn (the lone runs' flags are DQN's)")
    try:
        return corun.rank_alone_flags(config, workers, job_num_envs)
    except (corun.CorunError, ConfigError) as error:
        raise BenchmarkError(f"--corun: {error}") from None


def run_corun(workers: int, round_index: int, args, config, train_flags) -> dict:
    """`workers` one-worker runs at once, each doing one rank's work on that rank's cores (its seed too); each
    is timed like a rank of the job (--measure_env_steps / N of its own env steps after its fill), then runs one
    log interval more, untimed, so that the others stay busy beside a run that is still being timed."""
    from hvd_dqn.measure import corun

    lone_flags = corun_flags(config, workers, args.job_num_envs)
    log_interval, total = run_length(rank_learning_starts(config, workers), args.measure_env_steps // workers,
                                     args.log_points, untimed_intervals=1)
    os.makedirs(args.workdir, exist_ok=True)
    environment = horovod_setup.launcher_environment()
    started = []
    try:
        for rank, cores in enumerate(corun.core_blocks(os.sched_getaffinity(0), workers, args.cores_per_rank)):
            logdir = os.path.join(args.workdir, f"corun{workers}_round{round_index}_rank{rank}")
            shutil.rmtree(logdir, ignore_errors=True)
            command = command_for(1, args, logdir, total, log_interval,
                                  [*train_flags, *lone_flags, f"--seed={config.seed + rank}"])
            started.append((logdir, corun.start_bound(command, cores, logdir + ".log", environment)))
        statuses = [process.wait() for _, process in started]
    finally:
        for _, process in started:
            if process.poll() is None:
                process.kill()
    failed = [f"{logdir}.log" for (logdir, _), status in zip(started, statuses) if status != 0]
    if failed:
        raise BenchmarkError(f"--corun, {workers} lone runs, round {round_index + 1}: hvd_dqn.train failed; see "
                             f"{', '.join(failed)}")
    lone = [measured_rates(os.path.join(logdir, "metrics.csv"), untimed_tail=1)[0] for logdir, _ in started]
    return dict(workers=workers, round=round_index, lone_env_steps_per_s=lone,
                env_steps_per_s=workers * min(lone))


def round_order(workers_list, corun: bool, round_index: int):
    """The runs of one round as ("job", N) and ("corun", N) steps: the jobs by worker count, then the lone runs,
    and every second round the other way round, so that a machine speeding up or slowing down over the
    benchmark favours no configuration."""
    steps = [("job", workers) for workers in workers_list]
    steps += [("corun", workers) for workers in workers_list if corun and workers > 1]
    return steps if round_index % 2 == 0 else steps[::-1]


def summarise_corun(coruns, runs, base: int) -> dict:
    """corun_env_steps_per_s_<N>, corun_ceiling_<N> (over the base's rate in the same round) and
    share_of_ceiling_<N> (the workers' speed-up over the ceiling, round by round), as medians."""
    figures = {}
    rate_of = {(run["workers"], run["round"]): run["env_steps_per_s"] for run in runs}
    for workers in sorted({corun_run["workers"] for corun_run in coruns}):
        mine = [corun_run for corun_run in coruns if corun_run["workers"] == workers]
        ceilings = [corun_run["env_steps_per_s"] / rate_of[(base, corun_run["round"])] for corun_run in mine]
        shares = [rate_of[(workers, corun_run["round"])] / corun_run["env_steps_per_s"] for corun_run in mine]
        median_rate = statistics.median(corun_run["env_steps_per_s"] for corun_run in mine)
        figures[f"corun_env_steps_per_s_{workers}"] = round(median_rate, 1)
        figures[f"corun_ceiling_{workers}"] = round(statistics.median(ceilings), 3)
        figures[f"share_of_ceiling_{workers}"] = round(statistics.median(shares), 3)
    return figures


def summarise(runs, workers_list) -> dict:
    results = {}
    for workers in workers_list:
        mine = [run for run in runs if run["workers"] == workers]
        results[f"env_steps_per_s_{workers}"] = round(statistics.median(run["env_steps_per_s"] for run in mine), 1)
        results[f"updates_per_s_{workers}"] = round(statistics.median(run["updates_per_s"] for run in mine), 1)
    base = min(workers_list)
    for workers in workers_list:
        if workers == base:
            continue
        ratios = [run["env_steps_per_s"] / next(other["env_steps_per_s"] for other in runs
                                                if other["workers"] == base and other["round"] == run["round"])
                  for run in runs if run["workers"] == workers]
        speedup = statistics.median(ratios)
        results[f"workers_speedup_{workers}"] = round(speedup, 3)
        results[f"workers_efficiency_{workers}"] = round(speedup * base / workers, 3)
    return results


def write_report(path, report: dict) -> None:
    """The report as indented JSON at `path` (nothing when it is None)."""
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")


def parse_workers(text: str):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(value <= 0 for value in values) or len(set(values)) != len(values):
        raise BenchmarkError(f"--workers={text}: must list distinct positive worker counts, e.g. 1,2")
    return sorted(values)


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, train_flags = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True, help="The preset every run trains with.")
    parser.add_argument("--workers", default="1,2", help="Worker counts, comma-separated; the fewest is the base.")
    parser.add_argument("--cores_per_rank", type=int, default=1, help="Cores each worker is bound to.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Rounds, every second one in the reverse order; medians are reported.")
    parser.add_argument("--measure_env_steps", type=int, default=20000,
                        help="Env steps (of the job) timed in each run, after its memory is ready.")
    parser.add_argument("--log_points", type=int, default=5, help="Log points within the timed env steps.")
    parser.add_argument("--job_num_envs", type=int, default=None,
                        help="With --counts_per_rank (whose --num_envs counts per rank): the envs of the whole "
                             "job, split over each run's workers, so every worker count steps as many envs.")
    parser.add_argument("--controller", choices=("gloo", "mpi"), default="gloo",
                        help="horovodrun's controller for the multi-worker runs.")
    parser.add_argument("--corun", action="store_true",
                        help="Also run, each round, N lone one-worker runs at once, each doing one rank's work on "
                             "its cores: the speed-up the cores allow before any exchange (corun_ceiling_<N>).")
    parser.add_argument("--workdir", default=None, help="Folder for the runs' logdirs (default: a temporary one).")
    parser.add_argument("--json", default=None, help="Writes the figures and every run's rates here.")
    args = parser.parse_args(argv)
    try:
        workers_list = parse_workers(args.workers)
        if args.cores_per_rank <= 0 or args.rounds <= 0 or args.measure_env_steps <= 0 or args.log_points < 2:
            raise BenchmarkError("--cores_per_rank, --rounds and --measure_env_steps must be positive, "
                                 "--log_points at least 2")
        if not os.path.exists(args.flagfile):
            raise BenchmarkError(f"--flagfile={args.flagfile}: no such file")
        if any(flag.startswith(("--cores_per_rank", "--logdir", "--total_env_steps")) for flag in train_flags):
            raise BenchmarkError("--cores_per_rank, --logdir and --total_env_steps are the benchmark's to set; leave "
                                 "them out of the flags after --")
        cores = len(os.sched_getaffinity(0))
        if max(workers_list) * args.cores_per_rank > cores:
            raise BenchmarkError(f"--workers={args.workers} with --cores_per_rank={args.cores_per_rank} needs "
                                 f"{max(workers_list) * args.cores_per_rank} cores; this machine has {cores}")
        config = resolved_config(args.flagfile, train_flags)
        problem = problem_with_runs(config, workers_list, f"--workers={args.workers}", args.job_num_envs, train_flags)
        if problem:
            raise BenchmarkError(problem)
        for workers in workers_list if args.corun else ():
            corun_flags(config, workers, args.job_num_envs)  # before any run starts
        temporary = None if args.workdir else tempfile.mkdtemp(prefix="hvd_dqn_workers_")
        args.workdir = args.workdir or temporary
        runs, coruns = [], []
        try:
            for round_index in range(args.rounds):
                for step in round_order(workers_list, args.corun, round_index):
                    if step[0] == "job":
                        run = run_once(step[1], round_index, args, config, train_flags)
                        runs.append(run)
                        print(f"[{PROGRAM}] round {round_index + 1}, {step[1]} worker(s): "
                              f"{run['env_steps_per_s']:,.0f} env steps/s, {run['updates_per_s']:,.1f} updates/s",
                              flush=True)
                    else:
                        coruns.append(run_corun(step[1], round_index, args, config, train_flags))
                        lone = ", ".join(f"{rate:,.0f}" for rate in coruns[-1]["lone_env_steps_per_s"])
                        print(f"[{PROGRAM}] round {round_index + 1}, {step[1]} lone runs at once: {lone} env "
                              f"steps/s each", flush=True)
        finally:
            if temporary:
                shutil.rmtree(temporary, ignore_errors=True)
        results = summarise(runs, workers_list)
        results.update(summarise_corun(coruns, runs, min(workers_list)))
        report = dict(results, flagfile=args.flagfile, train_flags=train_flags, job_num_envs=args.job_num_envs,
                      cores_per_rank=args.cores_per_rank,
                      controller=args.controller, rounds=args.rounds, measure_env_steps=args.measure_env_steps,
                      rank_scaling=config.setting_values().get("rank_scaling"),  # None for PQN
                      runs=[{key: value for key, value in run.items() if key != "logdir" or not temporary}
                            for run in runs],
                      coruns=coruns)
        write_report(args.json, report)
    except (BenchmarkError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    for key, value in results.items():
        print(f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
