"""The scaling study's runs: training each (ranks, seed) under horovodrun to the budget, continuing a run that
was stopped from its checkpoint (replay memories included), one study at a time per run (a lock), and the
raw evidence each finished run leaves beside the results with its provenance (preset flags, commits, wall
time), checked so that runs made otherwise are never mixed in."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from hvd_dqn.plan.study_report import StudyError

PROGRAM = "hvd_dqn.plan.scaling_study"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout (git, paths)


def finished_env_steps(logdir: str):
    """The env steps of the run's newest complete checkpoint, or None."""
    from hvd_dqn.logdir import checkpoint

    latest = checkpoint.latest_checkpoint(logdir) if os.path.isdir(logdir) else None
    return checkpoint.read_counters(latest)["env_steps"] if latest else None


def run_finished(logdir: str, done, args) -> bool:
    """Whether the run in `logdir`, whose newest checkpoint is at `done` env steps (None: none), is done: a
    checkpoint at the budget, or, under --stop_at_target, episodes that reached the target (the run's own stop
    rule ended it there, or a signal came after the crossing: either way the env steps to the target are known
    and training on would not change them)."""
    if done is None:
        return False
    if done >= args.budget_env_steps:
        return True
    if not args.stop_at_target:
        return False
    from hvd_dqn.reports.score import env_steps_to_target, read_run

    return env_steps_to_target(read_run(logdir)[1], args.target, args.window) is not None


def holds_replay(logdir: str, ranks: int) -> bool:
    """Whether the run's newest checkpoint holds every rank's replay memory (a study's part stopped by a signal)."""
    from hvd_dqn.logdir import checkpoint

    latest = checkpoint.latest_checkpoint(logdir)
    return latest is not None and all(os.path.exists(checkpoint.replay_shard_path(latest, rank))
                                      for rank in range(ranks))


def train(ranks: int, seed: int, logdir: str, args, extra, resume: bool) -> float:
    """Trains (or, with `resume`, continues from its newest checkpoint) one run; returns this part's wall time.
    Every checkpoint holds the ranks' replay memories (and CartPole's or MinAtar's emulators), so a run stopped
    by a signal continues where it stopped (--resume --checkpoint_replay): a run longer than one sitting is not
    thrown away."""
    # The launcher and the ranks from the study's own environment (the project's venv).
    command = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(ranks), f"--{args.controller}",
               sys.executable, "-m", "hvd_dqn.train", f"--flagfile={args.flagfile}",
               f"--seed={seed}", f"--logdir={logdir}", f"--total_env_steps={args.budget_env_steps}",
               "--eval_interval_env_steps=0", *stop_rule(args), "--checkpoint_replay",
               f"--checkpoint_interval_env_steps={args.budget_env_steps}", *extra, *(["--resume"] if resume else [])]
    os.makedirs(os.path.dirname(logdir), exist_ok=True)
    start = time.time()
    with open(logdir + ".log", "a" if resume else "w") as log:
        from hvd_dqn.run.horovod_setup import launcher_environment

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
    if not run_finished(logdir, done, args):
        # The ranks stop cleanly, with a checkpoint and status 0, on a SIGTERM from anywhere (to horovodrun, or to
        # the ranks by a scheduler); such a run is unfinished, not a result: keeping it would put a truncated
        # curve into the study (it happened once).
        before = "the target and " if args.stop_at_target else ""
        raise StudyError(f"ranks {ranks}, seed {seed}: the run stopped at {done or 0:,} env steps, before {before}the "
                         f"budget of {args.budget_env_steps:,} (a signal to horovodrun or its ranks?); run the same "
                         f"command again to continue it from its checkpoint (see {logdir}.log)")
    return time.time() - start


def stop_rule(args):
    """The runs' --stop_at_train_return: never (inf, so that every run is measured at the budget), or under
    --stop_at_target the study's own target and window. The rule is checked at the preset's log points on the
    job's latest episodes as played, so it ends a run at the first log point at or after the study's crossing,
    never before it; the rule's bookkeeping runs either way, so the run up to there is the same."""
    if not args.stop_at_target:
        return ["--stop_at_train_return=inf"]
    return [f"--stop_at_train_return={args.target}", f"--stop_train_episodes={args.window}"]


def is_rank_command(command: list) -> bool:
    """Whether a process's command line is one of the run's ranks: Python running hvd_dqn.train itself. The
    launchers name hvd_dqn.train too (horovodrun, run by Python; mpirun, under --controller=mpi) and must not
    get the stop signal: on SIGTERM mpirun passes it on and then kills the ranks, perhaps mid-checkpoint."""
    return (len(command) >= 3 and os.path.basename(command[0]).startswith("python")
            and command[1:3] == ["-m", "hvd_dqn.train"])


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
                     if is_rank_command(child.cmdline())]
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


def refuse_a_stop_below_the_target(evidence: str, target: float, window: int, remedy: str = "another --out") -> None:
    """A StudyError if the kept run in `evidence` was stopped by a rule below `target` (or over another window):
    where it ended says nothing of when it would have reached `target`. One stopped at a higher target, over
    the same window, crossed every lower target before its stop, so its evidence serves them all. `remedy`:
    the option the user changes to read or keep other evidence (--out, or --evidence when it was given)."""
    with open(os.path.join(evidence, "config.json")) as handle:
        config = json.load(handle)
    stopped_at, stop_window = config.get("stop_at_train_return"), config.get("stop_train_episodes")
    if stopped_at is None or float(stopped_at) == float("inf"):
        return
    if float(stopped_at) < target or (stop_window is not None and int(stop_window) != window):
        raise StudyError(f"{evidence} holds a run stopped once {stop_window} episodes averaged {stopped_at}: it "
                         f"cannot say when {window} episodes first averaged {target}; choose {remedy}")


def kept_evidence(evidence: str, provenance: dict, remedy: str = "another --out"):
    """The provenance of complete evidence in `evidence` made as `provenance` asks, None if there is none; a
    StudyError if the evidence there was made with another preset, flags or budget (it would be mixed in);
    `remedy` as for refuse_a_stop_below_the_target."""
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
    # evidence kept (or asked for) before the time mode ran unbound, and before runs could end at the target
    defaults = {"cores_per_rank": 0, "stop_at_target": False}
    differing = [key for key in ("flagfile", preset_key, "extra_flags", "job_num_envs", "cores_per_rank",
                                 "budget_env_steps", "stop_at_target", "ranks", "seed")
                 if kept.get(key, defaults.get(key)) != provenance.get(key, defaults.get(key))]
    if differing:
        raise StudyError(f"{evidence} holds a run made with another {', '.join(differing)} "
                         f"({', '.join(f'{key}={kept.get(key)!r}' for key in differing)}); choose {remedy}")
    return kept
