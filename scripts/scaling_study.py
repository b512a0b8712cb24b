#!/usr/bin/env python
"""Sample efficiency against the number of ranks: trains a preset with each rank count and seed, then reports
how many env steps each run needed to reach a target return, and the return at a fixed budget.

    .venv/bin/python scripts/scaling_study.py --flagfile=configs/cartpole.flags --ranks=1,2,4,8 --seeds=0,1,2,3,4 \\
        --target=475 --budget_env_steps=100000 --workdir=runs/scaling_cartpole --out=results/scaling/cartpole
    ... -- --learning_rate=0.0005          # flags after "--" go to every run of hvd_dqn.train
    ... --job_num_envs=8 -- --rank_scaling=batch   # 8 envs in every job: --num_envs=8/ranks per rank

"Reached the target" means what gymnasium means by solving CartPole-v1: the mean return of --window (100)
consecutive training episodes, as they were played (ordered by the env step at which they ended, over all
ranks), is at least --target. The env steps to target are those at the end of the window's last episode.
The return at the budget is the mean of the last --window training episodes of the run. Evaluation during
training and the preset's --stop_at_train_return are switched off, so no run stops early and every run is
measured at the same budget.

Each finished run's evidence (episodes.csv, metrics.csv, config.json and run.json with its flags, wall time and
the commit each part was trained with) is copied to OUT_runs/np<ranks>_seed<seed>/, beside the results, so anyone
can recompute the study from the raw episodes. Runs whose evidence is already there (made with the same preset
flags, comments aside, and the same flags after --), or that finished in --workdir (a final checkpoint at the
budget), are not trained again: a study can be stopped and continued, in another session or on another machine,
from what the repository holds. A run stopped part-way (SIGTERM or Ctrl-C to the study, passed on to its ranks; or a signal to horovodrun
or the ranks themselves, which the study reports and does not take for finished) keeps a checkpoint with its
replay memories and, when the study is started again, continues from it (--resume --checkpoint_replay). With
CartPole or MinAtar, whose emulators the checkpoint holds too, the continued run is the run that never stopped;
Atari's emulators cannot be saved, so the episodes under way at the stop never end in episodes.csv. run.json
counts the parts; the wall time adds them up. Ranks beyond the cores oversubscribe them: env steps, not wall
time, are compared, unless the study runs in time mode (--cores_per_rank=K): then every rank of every run, the
one-rank baseline included, is bound to K cores of its own, the runs start over MPI (--controller), and each
record also gives wall_s_to_target, the seconds of training at which the target was reached (episodes.csv's
wall_s, continued across a run's parts).
Writes OUT.json (one record per run plus a summary per rank count) and OUT.png."""
import argparse
import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

PROGRAM = "scaling_study.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class StudyError(Exception):
    pass


def parse_int_list(text: str, name: str):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise StudyError(f"--{name}={text}: must be a comma-separated list of integers") from None
    if not values or any(value < 0 for value in values) or (name == "ranks" and 0 in values):
        raise StudyError(f"--{name}={text}: must list {'positive' if name == 'ranks' else 'non-negative'} integers")
    return values


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


def read_run(logdir: str):
    """(env id, [(env steps at the episode's end, return, seconds of training then), ...]) of a finished run,
    from its logdir."""
    from hvd_dqn.logdir.curves import CurveError, load_run

    try:
        run = load_run(logdir)
    except CurveError as error:
        raise StudyError(f"{error} (see {logdir}.log)") from None
    ends = (run.episode_frames // run.frames_per_step).astype(int)
    return run.env_id, list(zip(ends.tolist(), run.episode_returns.tolist(), run.episode_wall_s.tolist()))


def finished_env_steps(logdir: str):
    """The env steps of the run's newest complete checkpoint, or None."""
    from hvd_dqn.logdir import checkpoint

    latest = checkpoint.latest_checkpoint(logdir) if os.path.isdir(logdir) else None
    return checkpoint.read_counters(latest)["env_steps"] if latest else None


def holds_replay(logdir: str, ranks: int) -> bool:
    """Whether the run's newest checkpoint holds every rank's replay memory (a study's part stopped by a signal)."""
    from hvd_dqn.logdir import checkpoint

    latest = checkpoint.latest_checkpoint(logdir)
    return latest is not None and all(os.path.exists(checkpoint.replay_shard_path(latest, rank))
                                      for rank in range(ranks))


def resolved_config(flagfile: str, run_flags):
    """The TrainConfig the runs train with (the preset, then the flags after "--"), checked before any run
    trains: a bad flag is a StudyError naming it, not a failed run."""
    from hvd_dqn.config import ConfigError
    from hvd_dqn.flags import config_of_runs

    try:
        return config_of_runs(PROGRAM, flagfile, run_flags)
    except ConfigError as error:
        raise StudyError(f"the runs' flags: {error}") from None


def train(ranks: int, seed: int, logdir: str, args, extra, resume: bool) -> float:
    """Trains (or, with `resume`, continues from its newest checkpoint) one run; returns this part's wall time.
    Every checkpoint holds the ranks' replay memories (and CartPole's or MinAtar's emulators), so a run stopped
    by a signal continues where it stopped (--resume --checkpoint_replay): a run longer than a session is not
    thrown away."""
    command = [os.path.join(REPO, ".venv", "bin", "horovodrun"), "-np", str(ranks), f"--{args.controller}",
               os.path.join(REPO, ".venv", "bin", "python"), "-m", "hvd_dqn.train", f"--flagfile={args.flagfile}",
               f"--seed={seed}", f"--logdir={logdir}", f"--total_env_steps={args.budget_env_steps}",
               "--eval_interval_env_steps=0", "--stop_at_train_return=inf", "--checkpoint_replay",
               f"--checkpoint_interval_env_steps={args.budget_env_steps}", *extra, *(["--resume"] if resume else [])]
    os.makedirs(os.path.dirname(logdir), exist_ok=True)
    start = time.time()
    with open(logdir + ".log", "a" if resume else "w") as log:
        from hvd_dqn.run.distributed import launcher_environment

        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=launcher_environment())
        with forward_stop_signals(process) as stop:
            status = process.wait()
    if stop.received:
        done = finished_env_steps(logdir)
        next_time = "continue it from its checkpoint" if done else "train it (it had no checkpoint yet)"
        raise StudyError(f"stopped by {stop.received} at {done or 0:,} env steps of ranks {ranks}, seed {seed}; "
                         f"run the same command again to {next_time} (see {logdir}.log)")
    if status != 0:
        raise StudyError(f"ranks {ranks}, seed {seed}: hvd_dqn.train exited with status {status}; see {logdir}.log")
    done = finished_env_steps(logdir)
    if done is None or done < args.budget_env_steps:
        # The ranks stop cleanly, with a checkpoint and status 0, on a SIGTERM from anywhere (to horovodrun, or to
        # the ranks by a scheduler); such a run is unfinished, not a result: keeping it would put a truncated
        # curve into the study (it happened once).
        raise StudyError(f"ranks {ranks}, seed {seed}: the run stopped at {done or 0:,} env steps, before the budget "
                         f"of {args.budget_env_steps:,} (a signal to horovodrun or its ranks?); run the same command "
                         f"again to continue it from its checkpoint (see {logdir}.log)")
    return time.time() - start


class forward_stop_signals(contextlib.AbstractContextManager):
    """While a run trains, SIGTERM or SIGINT to the study is passed to the run's ranks themselves, which agree to
    stop after the same iteration and write a checkpoint. horovodrun is not asked: it would give its ranks a few
    seconds and then kill them, perhaps in the middle of the checkpoint."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.received, self.previous = process, None, {}

    def __enter__(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            self.previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False

    def _forward(self, signum, frame):
        import psutil  # horovodrun's own dependency

        self.received = signal.Signals(signum).name
        try:
            ranks = [child for child in psutil.Process(self.process.pid).children(recursive=True)
                     if "hvd_dqn.train" in child.cmdline() and "horovodrun" not in " ".join(child.cmdline())]
        except psutil.Error:
            ranks = []
        for rank in ranks:
            with contextlib.suppress(psutil.Error):
                rank.send_signal(signal.SIGTERM)
        if not ranks:  # still starting up: nothing to checkpoint yet
            self.process.terminate()


@contextlib.contextmanager
def run_lock(logdir: str):
    """Holds `logdir`.lock while a run is checked, trained and kept. A second study on the same --workdir
    (started while the first trains) would otherwise take the run for unfinished and remove its logdir under
    the training process, which happened once: the first run's episodes were lost. The lock goes with the
    process that holds it, so a study that was killed leaves nothing to clean up."""
    os.makedirs(os.path.dirname(logdir), exist_ok=True)
    with open(logdir + ".lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StudyError(f"{logdir} is being trained by another process (a study on the same --workdir); "
                             "wait for it to finish, or use another --workdir") from None
        yield


def recorded_wall(logdir: str):
    """The wall time the study spent training the run so far (over all its parts), or None if not recorded."""
    try:
        with open(logdir + ".wall_s") as handle:
            return float(handle.read())
    except (OSError, ValueError):
        return None


def git(*arguments) -> subprocess.CompletedProcess:
    """A git command in the repository, its output as bytes (a preset's content is compared byte for byte)."""
    return subprocess.run(["git", *arguments], cwd=REPO, capture_output=True)


def code_version() -> str:
    """The repository's commit, with "+changes" if files under version control differ from it, results/ aside:
    a study rewrites its own OUT.json and OUT.png there, and the next run's code is no less the commit's."""
    commit = git("rev-parse", "--short=12", "HEAD").stdout.decode().strip() or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").stdout.strip()
    return commit + ("+changes" if changed else "")


def recorded_commits(logdir: str):
    """The commits the run's parts were trained with, one per part (the run was started len() times), or None
    if not recorded."""
    try:
        with open(logdir + ".commit") as handle:
            return [line.strip() for line in handle if line.strip()] or None
    except OSError:
        return None


def train_or_continue(ranks: int, seed: int, logdir: str, done, wall, args, extra) -> float:
    """Trains the run to the budget: continues it if it has a checkpoint (`done` env steps), else starts it
    afresh. Returns the wall time of all its parts; keeps the running total beside the log after each part."""
    resume = done is not None and holds_replay(logdir, ranks)
    if not resume:  # no checkpoint, or one without the replay memories: it could not continue exactly
        shutil.rmtree(logdir, ignore_errors=True)
        wall = 0.0
    print(f"[{PROGRAM}] {f'continuing from {done:,} env steps' if resume else 'training'}: ranks {ranks}, "
          f"seed {seed} -> {logdir}", flush=True)
    with open(logdir + ".commit", "a" if resume else "w") as handle:  # the code of each part
        handle.write(f"{code_version()}\n")
    start = time.time()
    try:
        train(ranks, seed, logdir, args, extra, resume)
    finally:  # a stopped part's time counts too
        wall = (wall or 0.0) + time.time() - start
        with open(logdir + ".wall_s", "w") as handle:
            handle.write(f"{wall:.1f}\n")
    return wall


EVIDENCE_FILES = ("episodes.csv", "metrics.csv", "config.json")


def keep_evidence(logdir: str, evidence: str, provenance: dict) -> None:
    """Copies a finished run's raw evidence to `evidence`, with run.json (its provenance) written last, so a
    folder holding run.json is complete."""
    shutil.rmtree(evidence, ignore_errors=True)
    os.makedirs(evidence)
    for name in EVIDENCE_FILES:
        shutil.copyfile(os.path.join(logdir, name), os.path.join(evidence, name))
    with open(os.path.join(evidence, "run.json"), "w") as handle:
        json.dump(provenance, handle, indent=2)
        handle.write("\n")


def preset_flags_digest(preset: bytes) -> str:
    """The sha256 (16 hex digits) of what a preset sets: its flag lines in order, without comments and blank
    lines (absl's flagfile syntax: whole-line comments only). Evidence is tied to this, so correcting a
    preset's comments does not orphan the runs made with it, while any change of a value does."""
    lines = (line.strip() for line in preset.decode("utf-8").splitlines())
    flags_only = "\n".join(line for line in lines if line and not line.startswith(("#", "//")))
    return hashlib.sha256(flags_only.encode("utf-8")).hexdigest()[:16]


def recorded_flags_digest(kept: dict):
    """The preset_flags_sha256 of evidence. Evidence kept before that field existed holds the preset's raw
    sha256 only: its flags digest is computed from the version of the preset in the repository's history whose
    raw sha256 that is. None if no such version is found (a preset never committed as it was run)."""
    if "preset_flags_sha256" in kept:
        return kept["preset_flags_sha256"]
    if not kept.get("flagfile") or not kept.get("flagfile_sha256"):
        return None
    versions = git("log", "--format=%H", "--", kept["flagfile"]).stdout.decode().split()
    for commit in versions:
        shown = git("show", f"{commit}:{kept['flagfile']}")
        if shown.returncode == 0 and hashlib.sha256(shown.stdout).hexdigest()[:16] == kept["flagfile_sha256"]:
            return preset_flags_digest(shown.stdout)
    return None


def kept_evidence(evidence: str, provenance: dict):
    """The provenance of complete evidence in `evidence` made as `provenance` asks, None if there is none; a
    StudyError if the evidence there was made with another preset, flags or budget (it would be mixed in)."""
    try:
        with open(os.path.join(evidence, "run.json")) as handle:
            kept = json.load(handle)
    except (OSError, ValueError):
        return None
    flags_digest = recorded_flags_digest(kept)
    if flags_digest is None:  # old evidence whose preset is not in the history: its raw sha256 (comments too)
        preset_key = "flagfile_sha256"
    else:  # the preset's flags decide
        preset_key, kept = "preset_flags_sha256", dict(kept, preset_flags_sha256=flags_digest)
    defaults = {"cores_per_rank": 0}  # evidence kept before the time mode ran unbound
    differing = [key for key in ("flagfile", preset_key, "extra_flags", "job_num_envs", "cores_per_rank",
                                 "budget_env_steps", "ranks", "seed")
                 if kept.get(key, defaults.get(key)) != provenance[key]]
    if differing:
        raise StudyError(f"{evidence} holds a run made with another {', '.join(differing)} "
                         f"({', '.join(f'{key}={kept.get(key)!r}' for key in differing)}); choose another --out")
    return kept


def censored_median(env_steps_to_target):
    """The median over all runs, a run that never reached the target counting as beyond the budget (None in
    the list): defined while fewer than half the runs failed, None otherwise (and for no runs)."""
    ordered = sorted(math.inf if value is None else value for value in env_steps_to_target)
    median = statistics.median(ordered) if ordered else math.inf
    return None if math.isinf(median) else median


def summarise(records, ranks_list):
    summary = []
    for ranks in ranks_list:
        runs = [record for record in records if record["ranks"] == ranks]
        reached = [record["env_steps_to_target"] for record in runs if record["env_steps_to_target"] is not None]
        times = [record.get("wall_s_to_target") for record in runs]
        finals = [record["final_return"] for record in runs if record["final_return"] is not None]
        summary.append(dict(ranks=ranks, runs=len(runs), reached_target=len(reached),
                            median_env_steps_to_target=censored_median([record["env_steps_to_target"]
                                                                        for record in runs]),
                            min_env_steps_to_target=min(reached) if reached else None,
                            max_env_steps_to_target=max(reached) if reached else None,
                            # Where every run that reached the target has its time (episodes.csv with wall_s).
                            median_wall_s_to_target=censored_median(times) if all(
                                time is not None for time, record in zip(times, runs)
                                if record["env_steps_to_target"] is not None) else None,
                            median_final_return=statistics.median(finals) if finals else None,
                            min_final_return=min(finals) if finals else None,
                            max_final_return=max(finals) if finals else None))
    for measure in ("env_steps", "wall_s"):
        base = next((row[f"median_{measure}_to_target"] for row in summary if row["ranks"] == min(ranks_list)), None)
        for row in summary:
            median = row[f"median_{measure}_to_target"]
            row[f"{measure}_ratio_to_fewest_ranks"] = round(median / base, 3) if base and median else None
    return summary


def draw(study, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hvd_dqn.logdir.curves import save_figure

    timed = any(record.get("wall_s_to_target") is not None for record in study["runs"])
    figure, panels = plt.subplots(1, 3 if timed else 2, figsize=(16 if timed else 11, 4.5), dpi=120)
    steps_axes, return_axes = panels[:2]
    for record in study["runs"]:
        if record["env_steps_to_target"] is not None:
            steps_axes.plot(record["ranks"], record["env_steps_to_target"], "o", color="C0", alpha=0.4)
        else:
            steps_axes.plot(record["ranks"], study["budget_env_steps"], "x", color="C3")
        return_axes.plot(record["ranks"], record["final_return"], "o", color="C1", alpha=0.4)
    rows = [row for row in study["summary"] if row["median_env_steps_to_target"] is not None]
    steps_axes.plot([row["ranks"] for row in rows], [row["median_env_steps_to_target"] for row in rows], "-",
                    color="C0", label="median over seeds")
    steps_axes.axhline(study["budget_env_steps"], color="C3", linestyle=":", label="budget (x: not reached)")
    finals = [row for row in study["summary"] if row["median_final_return"] is not None]
    return_axes.plot([row["ranks"] for row in finals], [row["median_final_return"] for row in finals], "-",
                     color="C1", label="median over seeds")
    return_axes.axhline(study["target"], color="grey", linestyle="--", label=f"target {study['target']:g}")
    if timed:  # time mode: seconds of training to the target, each rank on cores of its own
        time_axes = panels[2]
        for record in study["runs"]:
            if record.get("wall_s_to_target") is not None:
                time_axes.plot(record["ranks"], record["wall_s_to_target"], "o", color="C2", alpha=0.4)
        timed_rows = [row for row in study["summary"] if row.get("median_wall_s_to_target") is not None]
        time_axes.plot([row["ranks"] for row in timed_rows], [row["median_wall_s_to_target"] for row in timed_rows],
                       "-", color="C2", label="median over seeds")
        time_axes.set_ylabel(f"seconds of training to the target ({study['cores_per_rank']} core(s) per rank)")
    for axes in panels:
        axes.set_xscale("log", base=2)
        axes.set_xticks(study["ranks"], [str(ranks) for ranks in study["ranks"]])
        axes.set_xlabel("ranks")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    steps_axes.set_ylabel(f"env steps until the mean of {study['window']} training episodes >= {study['target']:g}")
    return_axes.set_ylabel(f"mean return of the last {study['window']} episodes at {study['budget_env_steps']:,}")
    measured = "sample efficiency and time" if timed else "sample efficiency"
    figure.suptitle(f"{study['task']}: {measured} against ranks ({os.path.basename(study['flagfile'])})")
    save_figure(figure, path)


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, extra = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True, help="The preset every run trains with.")
    parser.add_argument("--ranks", default="1,2,4,8", help="Rank counts, comma-separated.")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="Seeds, comma-separated.")
    parser.add_argument("--target", type=float, required=True, help="Return that counts as reached (CartPole: 475).")
    parser.add_argument("--window", type=int, default=100, help="Consecutive training episodes averaged (100).")
    parser.add_argument("--budget_env_steps", type=int, required=True, help="Env steps of every run (over ranks).")
    parser.add_argument("--workdir", required=True, help="Folder for the runs' logdirs (outside git).")
    parser.add_argument("--out", required=True, help="Writes OUT.json and OUT.png.")
    parser.add_argument("--job_num_envs", type=int, default=None,
                        help="Envs of the whole job, the same for every rank count: each run gets --num_envs="
                             "JOB_NUM_ENVS/ranks (for --rank_scaling=batch, whose --num_envs counts per rank; "
                             "under --rank_scaling=updates the preset's --num_envs is the job's already).")
    parser.add_argument("--cores_per_rank", type=int, default=0,
                        help="Time mode: every rank of every run, the one-rank baseline included, bound to this "
                             "many cores of its own (hvd_dqn.train --cores_per_rank), so that wall time to the "
                             "target compares worker for worker; rank counts this machine has no cores for are "
                             "refused. 0: unbound (ranks beyond the cores share them; compare env steps only).")
    parser.add_argument("--controller", choices=("gloo", "mpi"), default=None,
                        help="horovodrun's controller for the runs (the same run either way, bit for bit). "
                             "Default: mpi in time mode (Gloo's allreduce through loopback took 60 times MPI's "
                             "on one host: results/acceleration/README.md), gloo otherwise.")
    parser.add_argument("--report_only", action="store_true",
                        help="Train nothing: report the runs whose evidence is kept, list the others as missing.")
    args = parser.parse_args(argv)
    try:
        ranks_list, seeds = parse_int_list(args.ranks, "ranks"), parse_int_list(args.seeds, "seeds")
        if not os.path.exists(args.flagfile):
            raise StudyError(f"--flagfile={args.flagfile}: no such file")
        if args.window <= 0 or args.budget_env_steps <= 0:
            raise StudyError("--window and --budget_env_steps must be positive")
        config = resolved_config(args.flagfile, extra)
        args.controller = args.controller or ("mpi" if args.cores_per_rank else "gloo")
        if args.cores_per_rank < 0:
            raise StudyError(f"--cores_per_rank={args.cores_per_rank}: must be an integer >= 0")
        if any(flag.startswith("--cores_per_rank") for flag in extra):
            raise StudyError("--cores_per_rank: give it to the study (before --), which records it with every run")
        cores_here = len(os.sched_getaffinity(0))
        if args.cores_per_rank and max(ranks_list) * args.cores_per_rank > cores_here:
            raise StudyError(f"--cores_per_rank={args.cores_per_rank}: {max(ranks_list)} ranks need "
                             f"{max(ranks_list) * args.cores_per_rank} cores and this machine has {cores_here}; "
                             "wall time compares worker for worker only with a core (or more) for each")
        if args.job_num_envs is not None:
            if config.rank_scaling != "batch":
                raise StudyError(f"--job_num_envs={args.job_num_envs}: only for --rank_scaling=batch, whose "
                                 f"--num_envs counts per rank; under --rank_scaling={config.rank_scaling} the "
                                 f"preset's --num_envs={config.num_envs} is the job's already")
            if any(flag.startswith("--num_envs") for flag in extra):
                raise StudyError(f"--job_num_envs={args.job_num_envs} sets each run's --num_envs; leave --num_envs "
                                 "out of the flags after --")
            for ranks in ranks_list:
                if args.job_num_envs <= 0 or args.job_num_envs % ranks:
                    raise StudyError(f"--job_num_envs={args.job_num_envs}: must be a positive multiple of every "
                                     f"rank count (not of {ranks}), so each rank steps as many envs")
        out_folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_folder):
            raise StudyError(f"--out={args.out}: folder {out_folder} does not exist")
        args.flagfile = os.path.abspath(args.flagfile)
        records, missing, task = [], [], None
        evidence_root = args.out + "_runs"
        with open(args.flagfile, "rb") as handle:  # evidence is tied to the preset's content, not only its name
            preset = handle.read()
        for ranks in ranks_list:
            for seed in seeds:
                name = f"np{ranks}_seed{seed}"
                logdir = os.path.abspath(os.path.join(args.workdir, name))
                evidence = os.path.join(evidence_root, name)
                provenance = dict(flagfile=os.path.relpath(args.flagfile, REPO),
                                  flagfile_sha256=hashlib.sha256(preset).hexdigest()[:16],
                                  preset_flags_sha256=preset_flags_digest(preset),
                                  extra_flags=extra, job_num_envs=args.job_num_envs,
                                  cores_per_rank=args.cores_per_rank,
                                  budget_env_steps=args.budget_env_steps, ranks=ranks, seed=seed)
                run_flags = extra + ([] if args.job_num_envs is None else [f"--num_envs={args.job_num_envs // ranks}"])
                run_flags += [f"--cores_per_rank={args.cores_per_rank}"] if args.cores_per_rank else []
                kept = kept_evidence(evidence, provenance)
                if kept is None and args.report_only:
                    missing.append(dict(ranks=ranks, seed=seed))
                    continue
                if kept is None:
                    with run_lock(logdir):
                        wall = recorded_wall(logdir)
                        done = finished_env_steps(logdir)
                        if done is None or done < args.budget_env_steps:
                            wall = train_or_continue(ranks, seed, logdir, done, wall, args, run_flags)
                        commits = recorded_commits(logdir)
                        kept = dict(provenance, wall_s=None if wall is None else round(wall, 1),
                                    parts=len(commits) if commits else 1, commits=commits)
                        keep_evidence(logdir, evidence, kept)
                task, episodes = read_run(evidence)
                record = dict(ranks=ranks, seed=seed, cores_per_rank=args.cores_per_rank,
                              env_steps_to_target=env_steps_to_target(episodes, args.target, args.window),
                              wall_s_to_target=wall_s_to_target(episodes, args.target, args.window),
                              final_return=final_return(episodes, args.window), episodes=len(episodes),
                              wall_s=kept.get("wall_s"), parts=kept.get("parts", 1),
                              evidence=os.path.relpath(evidence, out_folder))
                records.append(record)
                print(f"[{PROGRAM}] ranks {ranks} seed {seed}: env steps to target {record['env_steps_to_target']} "
                      f"({record['wall_s_to_target']} s of training), final return {record['final_return']:.1f}",
                      flush=True)
        if not records:  # only under --report_only: a study that trains has a record of every run or stops
            raise StudyError(f"--report_only: {evidence_root} holds no evidence of these runs (ranks {args.ranks}, "
                             f"seeds {args.seeds}); train them first, without --report_only")
        study = dict(task=task, flagfile=os.path.relpath(args.flagfile, REPO), extra_flags=extra,
                     job_num_envs=args.job_num_envs, cores_per_rank=args.cores_per_rank,
                     controller=args.controller, target=args.target,
                     window=args.window, budget_env_steps=args.budget_env_steps, ranks=ranks_list, seeds=seeds,
                     runs=records, missing_runs=missing, summary=summarise(records, ranks_list))
        with open(args.out + ".json", "w") as handle:
            json.dump(study, handle, indent=2)
            handle.write("\n")
        draw(study, args.out + ".png")
    except (StudyError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    for row in study["summary"]:
        print(json.dumps(row))
    print(f"wrote {args.out}.json and {args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
