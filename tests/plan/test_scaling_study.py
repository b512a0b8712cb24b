"""python -m hvd_dqn.plan.scaling_study: the "solved" rule on hand-made episodes, and a real two-rank study on a tiny
budget."""
import json
import os
import re
import shutil
import types

import pytest

from conftest import PYTHON, REPO, run, subprocess_env

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _study_module():
    """The study's functions (its runs' scores, its report and its runs) under one name."""
    from hvd_dqn.plan import study_report, study_runs
    from hvd_dqn.reports import score

    return types.SimpleNamespace(**{**vars(score), **vars(study_report), **vars(study_runs)})


def _start_a_two_rank_study_and_wait_for_2000_env_steps(tmp_path):
    """(workdir, command, the study's process) of a 12,000-env-step CartPole study on 2 ranks, once its run has
    logged 2,000 env steps: a run under way, for the tests that stop it. The budget leaves the run about 10 s
    more to train: with 4,000 it sometimes finished between the log line and the test's signal."""
    import subprocess
    import time

    runs = tmp_path / "runs"
    command = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
               "--ranks=2", "--seeds=0", "--target=30", "--window=10", "--budget_env_steps=12000",
               f"--workdir={runs}", f"--out={tmp_path / 'cartpole'}", "--", "--learning_starts=500",
               "--log_interval_env_steps=1000"]
    study = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                             env=subprocess_env())
    log = runs / "np2_seed0.log"
    deadline = time.time() + 300
    while time.time() < deadline and not (log.exists() and "env steps 2,000/" in log.read_text()):
        if study.poll() is not None:
            out, err = study.communicate()
            pytest.fail(f"the study ended (status {study.returncode}) before its run logged 2,000 env steps:\n"
                        f"stdout:\n{out}\nstderr:\n{err}\nits run's log:\n{log.read_text() if log.exists() else ''}")
        time.sleep(1)
    return runs, command, study


def test_target_is_reached_when_a_window_of_consecutive_episodes_averages_it():
    study = _study_module()
    # (env steps at the episode's end, return), deliberately out of order (two ranks' rows interleave).
    episodes = [(30, 10.0), (10, 0.0), (20, 10.0), (40, 10.0), (50, 0.0), (60, 10.0)]
    assert study.env_steps_to_target(episodes, target=10.0, window=3) == 40  # episodes at 20, 30, 40
    assert study.env_steps_to_target(episodes, target=7.0, window=2) == 30  # 20 and 30 average 10
    assert study.env_steps_to_target(episodes, target=10.0, window=4) is None
    assert study.env_steps_to_target(episodes[:2], target=0.0, window=3) is None  # fewer than a window
    assert study.final_return(episodes, window=2) == 5.0  # the last two by env steps: 0 and 10
    assert study.final_return([], window=2) is None


def test_time_to_target_is_the_training_clock_at_the_episode_that_reached_it():
    study = _study_module()
    episodes = [(30, 10.0, 3.5), (10, 0.0, 1.0), (20, 10.0, 2.25), (40, 10.0, 4.0)]
    assert study.wall_s_to_target(episodes, target=10.0, window=2) == 3.5  # episodes at 20 and 30
    assert study.wall_s_to_target(episodes, target=11.0, window=2) is None
    assert study.wall_s_to_target([(10, 5.0, float("nan"))], target=1.0, window=1) is None  # written before wall_s


def test_the_median_counts_unsolved_runs_as_beyond_the_budget():
    study = _study_module()
    assert study.censored_median([70, None, 80, None, 60]) == 80  # the third of 60, 70, 80, beyond, beyond
    assert study.censored_median([70, None, None]) is None  # the median run did not solve
    assert study.censored_median([70, None]) is None  # the middle falls between a solve and a failure
    assert study.censored_median([70, 90]) == 80
    assert study.censored_median([]) is None
    [row] = study.summarise([dict(ranks=2, env_steps_to_target=value, final_return=1.0) for value in (5, None, 7)],
                            [2])
    assert (row["median_env_steps_to_target"], row["reached_target"], row["runs"]) == (7, 2, 3)


def test_a_tiny_two_rank_study_writes_one_record_per_run_and_a_summary(tmp_path):
    out = tmp_path / "cartpole"
    preset = tmp_path / "cartpole.flags"  # a copy, changed below
    shutil.copyfile(REPO / "configs" / "cartpole.flags", preset)
    study_command = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={preset}", "--ranks=2", "--seeds=0", "--target=30",
                     "--window=10", "--budget_env_steps=3000", f"--workdir={tmp_path / 'runs'}"]
    extra = ["--learning_starts=500", "--log_interval_env_steps=1000"]
    result = run([*study_command, f"--out={out}", "--", *extra], timeout=600)
    study = json.loads((tmp_path / "cartpole.json").read_text())
    assert study["task"] == "CartPole-v1" and study["target"] == 30 and study["budget_env_steps"] == 3000
    assert study["extra_flags"] == ["--learning_starts=500", "--log_interval_env_steps=1000"]
    [record] = study["runs"]
    assert {"ranks", "seed", "env_steps_to_target", "final_return"} <= set(record)
    assert (record["ranks"], record["seed"]) == (2, 0) and record["episodes"] >= 10
    # Random-ish early CartPole play lasts 10-40 steps per episode, so a mean of 30 may or may not be reached,
    # but the record must be consistent with the run's own episodes.
    evidence = tmp_path / record["evidence"]
    assert evidence == tmp_path / "cartpole_runs" / "np2_seed0"
    assert {path.name for path in evidence.iterdir()} == {"episodes.csv", "metrics.csv", "config.json", "run.json"}
    task, episodes = _study_module().read_run(str(evidence))
    assert task == "CartPole-v1"
    assert record["final_return"] == pytest.approx(_study_module().final_return(episodes, 10))
    assert max(episode[0] for episode in episodes) <= 3000
    [row] = study["summary"]
    assert row["ranks"] == 2 and row["runs"] == 1
    # Unbound ranks share the cores: the output says to compare env steps only.
    assert study["compare"].startswith("unbound ranks (--cores_per_rank=0): they share the machine's cores")
    assert "compare env steps only" in result.stdout
    assert (tmp_path / "cartpole.png").read_bytes().startswith(PNG_MAGIC)
    # Run again without the runs themselves (a fresh checkout): the evidence kept beside the results
    # is reused, not trained again, and gives the same record.
    shutil.rmtree(tmp_path / "runs")
    again = run([*study_command, f"--out={out}", "--", *extra], timeout=120)
    assert "training:" not in again.stdout and "training:" in result.stdout
    assert json.loads((tmp_path / "cartpole.json").read_text())["runs"] == study["runs"]
    # --report_only trains nothing: seed 1 has no evidence and is listed as missing.
    report = run([*study_command, f"--out={out}", "--seeds=0,1", "--report_only", "--", *extra], timeout=120)
    reported = json.loads((tmp_path / "cartpole.json").read_text())
    assert "training:" not in report.stdout and not (tmp_path / "runs").exists()
    assert reported["runs"] == study["runs"] and reported["missing_runs"] == [{"ranks": 2, "seed": 1}]
    # Evidence made with other flags is never mixed into a study.
    mixed = run([*study_command, f"--out={out}", "--", "--learning_starts=600"], timeout=120, check=False)
    assert mixed.returncode == 2 and mixed.stderr.strip() == (
        f"hvd_dqn.plan.scaling_study: error: {evidence} holds a run made with another extra_flags "
        f"(extra_flags={extra!r}); choose another --out")
    # A preset whose comments were corrected sets the same flags: its evidence stands.
    preset.write_text("# a comment corrected after the runs\n" + preset.read_text() + "\n# and one added\n")
    commented = run([*study_command, f"--out={out}", "--", *extra], timeout=120)
    assert "training:" not in commented.stdout
    assert json.loads((tmp_path / "cartpole.json").read_text())["runs"] == study["runs"]
    # But evidence made with another version of the preset's flags under the same name is refused.
    preset.write_text(preset.read_text() + "--gamma=0.98\n")
    changed = run([*study_command, f"--out={out}", "--", *extra], timeout=120, check=False)
    assert changed.returncode == 2 and changed.stderr.strip().startswith(
        f"hvd_dqn.plan.scaling_study: error: {evidence} holds a run made with another preset_flags_sha256 "
        "(preset_flags_sha256='")


def test_evidence_kept_before_the_flags_digest_is_matched_through_the_presets_history(tmp_path):
    """Evidence from before preset_flags_sha256 holds the preset's raw sha256 only; the version of the preset
    with that sha256 is found in the repository's history and its flags compared, so the MinAtar Breakout runs
    stand while the preset's comments change. A raw sha256 of no committed version is still compared raw."""
    import subprocess

    if subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True,
                      text=True).stdout.strip() == "true":
        pytest.skip("a shallow clone lacks the preset's history")
    study = _study_module()
    legacy = REPO / "results" / "scaling" / "minatar_breakout_updates_runs" / "np1_seed0"
    kept = json.loads((legacy / "run.json").read_text())
    assert "preset_flags_sha256" not in kept  # as written in 2026-11, before the field
    preset = (REPO / "configs" / "minatar.flags").read_bytes()
    provenance = dict(flagfile="configs/minatar.flags", flagfile_sha256="0" * 16,  # the raw bytes do not decide
                      preset_flags_sha256=study.preset_flags_digest(preset), extra_flags=["--rank_scaling=updates"],
                      job_num_envs=None, cores_per_rank=0, budget_env_steps=250000, ranks=1, seed=0)
    assert study.kept_evidence(str(legacy), provenance)["wall_s"] == kept["wall_s"]
    with pytest.raises(study.StudyError, match="another preset_flags_sha256"):
        study.kept_evidence(str(legacy), dict(provenance, preset_flags_sha256="1" * 16))
    unknown = tmp_path / "np1_seed0"
    unknown.mkdir()
    (unknown / "run.json").write_text(json.dumps(dict(kept, flagfile_sha256="f" * 16)))
    with pytest.raises(study.StudyError, match=r"another flagfile_sha256 \(flagfile_sha256='ffffffffffffffff'\)"):
        study.kept_evidence(str(unknown), provenance)


@pytest.mark.parametrize("arguments, message", [
    (["--ranks=0,2"], "--ranks=0,2: must list positive integers"),
    (["--seeds=a"], "--seeds=a: must be a comma-separated list of integers"),
    (["--flagfile=/nonexistent.flags"], "--flagfile=/nonexistent.flags: no such file"),
    (["--", "--lr_scale_rule=cube"], "the runs' flags: --lr_scale_rule=cube: must be one of linear, sqrt"),
    (["--", "--num_envz=4"], "the runs' flags: Unknown command line flag 'num_envz'. Did you mean: num_envs ?"),
    (["--job_num_envs=8"], "--job_num_envs=8: only with --counts_per_rank (whose --num_envs counts per rank); "
                           "without it --num_envs=8 is the job's envs already"),
    (["--ranks=1,3", "--job_num_envs=8", "--", "--counts_per_rank"],
     "--job_num_envs=8: must be a positive multiple of every worker count (1, 3), so each worker steps as many envs"),
    (["--ranks=1,3"], "--ranks=1,3: --num_envs=8 (the job's envs) must split evenly over the 3 ranks (or add "
                      "--counts_per_rank for that many envs on each rank)"),
    (["--job_num_envs=8", "--", "--counts_per_rank", "--num_envs=2"],
     "--job_num_envs=8 sets each run's --num_envs; leave --num_envs out of the flags after --"),
])
def test_bad_study_arguments_are_named_in_one_line(tmp_path, arguments, message):
    base = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--target=1", "--budget_env_steps=10",
            f"--workdir={tmp_path}", f"--out={tmp_path / 'x'}"]
    result = run([PYTHON, "-m", "hvd_dqn.plan.scaling_study", *base, *arguments], timeout=120, check=False)
    assert result.returncode == 2 and result.stderr.strip() == f"hvd_dqn.plan.scaling_study: error: {message}"


def test_job_num_envs_gives_every_rank_count_the_same_envs_with_per_rank_counts(tmp_path):
    """--counts_per_rank counts --num_envs per rank: --job_num_envs=4 at 2 ranks trains 2 envs per rank."""
    out = tmp_path / "batch"
    command = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
               "--ranks=2", "--seeds=0", "--target=30", "--window=10", "--budget_env_steps=1200",
               f"--workdir={tmp_path / 'runs'}", f"--out={out}", "--job_num_envs=4", "--",
               "--counts_per_rank", "--learning_starts=300", "--batch_size=32", "--log_interval_env_steps=600"]
    run(command, timeout=600)
    study = json.loads((tmp_path / "batch.json").read_text())
    assert study["job_num_envs"] == 4 and study["extra_flags"][0] == "--counts_per_rank"
    [record] = study["runs"]
    config = json.loads((tmp_path / record["evidence"] / "config.json").read_text())
    assert (config["num_envs"], config["counts_per_rank"]) == (2, True)
    assert json.loads((tmp_path / record["evidence"] / "run.json").read_text())["job_num_envs"] == 4
    # Evidence made with another number of envs in the job is not mixed in.
    command[command.index("--job_num_envs=4")] = "--job_num_envs=2"
    mixed = run(command, timeout=120, check=False)
    assert mixed.returncode == 2 and mixed.stderr.strip() == (
        f"hvd_dqn.plan.scaling_study: error: {tmp_path / record['evidence']} holds a run made with another job_num_envs "
        "(job_num_envs=4); choose another --out")


def test_a_run_another_study_is_training_is_left_alone(tmp_path):
    """Two studies on one --workdir: the second must not take the first's run in progress for unfinished and
    remove its logdir (which lost a run's episodes once); it stops with one line and touches nothing."""
    import fcntl

    runs = tmp_path / "runs"
    (runs / "np2_seed0").mkdir(parents=True)
    (runs / "np2_seed0" / "episodes.csv").write_text("env_steps,env_frames,rank,env,return,length\n")
    with open(runs / "np2_seed0.lock", "w") as held:  # as the first study holds it while its run trains
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = run([PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                      "--ranks=2", "--seeds=0", "--target=30", "--budget_env_steps=3000", f"--workdir={runs}",
                      f"--out={tmp_path / 'cartpole'}"], timeout=120, check=False)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"hvd_dqn.plan.scaling_study: error: {runs / 'np2_seed0'} is being trained by another process (a study on the same "
        "--workdir); wait for it to finish, or use another --workdir")
    assert (runs / "np2_seed0" / "episodes.csv").exists()


def test_the_stop_signal_goes_to_the_ranks_and_not_to_their_launcher():
    """Under MPI, mpirun's own command line names hvd_dqn.train; a SIGTERM to mpirun is passed on and followed by
    a kill, which once caught the ranks before their checkpoint. Only the ranks themselves get the study's signal."""
    from hvd_dqn.plan.study_runs import is_rank_command

    train = ["-m", "hvd_dqn.train", "--flagfile=configs/cartpole.flags", "--seed=0"]
    assert is_rank_command(["/repo/.venv/bin/python", *train])
    assert is_rank_command(["/usr/bin/python3.11", *train])
    assert not is_rank_command(["mpirun", "--allow-run-as-root", "-np", "2", "/repo/.venv/bin/python", *train])
    assert not is_rank_command(["/repo/.venv/bin/python", "/repo/.venv/bin/horovodrun", "-np", "2", "--gloo",
                                "/repo/.venv/bin/python", *train])
    assert not is_rank_command(["/bin/sh", "-c", "mpirun -np 2 /repo/.venv/bin/python -m hvd_dqn.train"])
    assert not is_rank_command([])


def test_a_study_stopped_by_sigterm_continues_its_run_from_the_checkpoint(tmp_path):
    """SIGTERM to the study reaches the run's ranks, which write a checkpoint with their replay memories; the
    same command continues that run (--resume --checkpoint_replay) instead of training it again, keeps the
    episodes already logged, and records that the run was trained in two parts."""
    import signal

    runs, command, study = _start_a_two_rank_study_and_wait_for_2000_env_steps(tmp_path)
    study.send_signal(signal.SIGTERM)
    out, err = study.communicate(timeout=300)
    checkpoint = sorted((runs / "np2_seed0" / "checkpoints").glob("ckpt-*"))[-1]
    stopped_at = int(checkpoint.name.split("-")[1])
    assert study.returncode == 2 and err.strip() == (
        f"hvd_dqn.plan.scaling_study: error: stopped by SIGTERM at {stopped_at:,} env steps of ranks 2, seed 0; run the same "
        f"command again to continue it from its checkpoint (see {runs / 'np2_seed0'}.log)")
    assert 2000 <= stopped_at < 12000
    assert {path.name for path in checkpoint.iterdir()} >= {"replay-rank00000.npz", "replay-rank00001.npz"}
    first_part = (runs / "np2_seed0" / "episodes.csv").read_text()
    again = run(command, timeout=600)
    assert f"continuing from {stopped_at:,} env steps: ranks 2, seed 0" in again.stdout
    assert "training:" not in again.stdout
    assert "replay memories restored" in (runs / "np2_seed0.log").read_text()
    [record] = json.loads((tmp_path / "cartpole.json").read_text())["runs"]
    assert record["parts"] == 2 and record["wall_s"] > 0
    run_json = json.loads((tmp_path / record["evidence"] / "run.json").read_text())
    assert len(run_json["commits"]) == 2 and all(re.fullmatch(r"[0-9a-f]{12}(\+changes)?", commit)
                                                 for commit in run_json["commits"])
    episodes = (tmp_path / record["evidence"] / "episodes.csv").read_text()
    assert episodes.startswith(first_part) and len(episodes) > len(first_part)
    assert _study_module().finished_env_steps(str(runs / "np2_seed0")) == 12000


def test_a_run_stopped_by_a_signal_from_outside_the_study_is_not_taken_for_finished(tmp_path):
    """SIGTERM to horovodrun (not to the study) makes the ranks stop cleanly, with a checkpoint and status 0.
    The study once took such a run for finished and kept its truncated curve as evidence; it must name the
    unfinished run instead, keep no evidence and write no study JSON, and leave the checkpoint to continue from."""
    import signal

    import psutil

    runs, command, study = _start_a_two_rank_study_and_wait_for_2000_env_steps(tmp_path)
    # The launcher: horovodrun itself under Gloo; under MPI horovodrun has become `/bin/sh -c mpirun ...`, whose
    # shell does not pass signals on, so the signal goes to mpirun (as a scheduler's would).
    [launcher] = [process for process in psutil.Process(study.pid).children(recursive=True)
                  if os.path.basename((process.cmdline() or [""])[0]) == "mpirun"
                  or any(part.endswith("horovodrun") for part in process.cmdline())]
    launcher.send_signal(signal.SIGTERM)
    out, err = study.communicate(timeout=300)
    checkpoints = sorted((runs / "np2_seed0" / "checkpoints").glob("ckpt-*"))
    stopped_at = int(checkpoints[-1].name.split("-")[1]) if checkpoints else 0
    assert study.returncode == 2, (out, err)
    assert stopped_at < 12000
    assert err.strip() in (
        # horovodrun's ranks checkpointed and exited cleanly (what happened in the incident)
        f"hvd_dqn.plan.scaling_study: error: ranks 2, seed 0: the run stopped at {stopped_at:,} env steps, before the budget "
        f"of 12,000 (a signal to horovodrun or its ranks?); run the same command again to continue it from its "
        f"checkpoint (see {runs / 'np2_seed0'}.log)",
        # or horovodrun killed them before they finished
        f"hvd_dqn.plan.scaling_study: error: ranks 2, seed 0: hvd_dqn.train exited with status 1; see {runs / 'np2_seed0'}.log")
    assert not (tmp_path / "cartpole_runs" / "np2_seed0").exists()
    assert not (tmp_path / "cartpole.json").exists()


def test_the_recorded_code_version_ignores_the_studys_own_results(tmp_path, monkeypatch):
    """A run's commit gets "+changes" when code or presets differ from it, not when a study has rewritten its
    OUT.json under results/ (which marked a 4-rank Breakout run "+changes" with the commit's own code)."""
    import subprocess

    def git(*arguments):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *arguments], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "study.json").write_text("{}\n")
    (tmp_path / "trainer.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "first")
    from hvd_dqn.plan import study_runs as study

    monkeypatch.setattr(study, "REPO", str(tmp_path))
    assert re.fullmatch(r"[0-9a-f]{12}", study.code_version())
    (tmp_path / "results" / "study.json").write_text('{"runs": []}\n')
    assert re.fullmatch(r"[0-9a-f]{12}", study.code_version())
    (tmp_path / "trainer.py").write_text("x = 2\n")
    assert re.fullmatch(r"[0-9a-f]{12}\+changes", study.code_version())


def test_the_study_takes_each_seed_at_every_rank_count_in_turn(tmp_path):
    """Runs go seed by seed, each rank count in turn, the order turning round from one seed to the next (a drift
    in the machine's speed then falls on every rank count alike, and not always on the one trained second); the
    report still lists them rank count by rank count. Hand-made evidence, --report_only."""
    study = _study_module()
    preset = (REPO / "configs" / "cartpole.flags").read_bytes()
    for ranks in (1, 2):
        for seed in (0, 2, 3):  # seed 1 has no evidence: it is missing at both rank counts
            provenance = dict(flagfile="configs/cartpole.flags",
                              flagfile_sha256=study.hashlib.sha256(preset).hexdigest()[:16],
                              preset_flags_sha256=study.preset_flags_digest(preset), extra_flags=[],
                              job_num_envs=None, cores_per_rank=0, budget_env_steps=400, ranks=ranks, seed=seed,
                              wall_s=9.0, parts=1)
            _hand_made_evidence(tmp_path / f"order_runs/np{ranks}_seed{seed}", [(100, 10.0, 1.0), (200, 10.0, 2.0)],
                                provenance)
    result = run([PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                  "--ranks=1,2", "--seeds=0,1,2,3", "--target=10", "--window=2", "--budget_env_steps=400",
                  f"--workdir={tmp_path / 'runs'}", f"--out={tmp_path / 'order'}", "--report_only"], timeout=120)
    visited = [tuple(int(word) for word in line.split(":")[0].split()[2::2])
               for line in result.stdout.splitlines() if line.startswith("[hvd_dqn.plan.scaling_study] ranks ")]
    assert visited == [(1, 0), (2, 0), (1, 2), (2, 2), (2, 3), (1, 3)]  # the 2nd and 4th seeds (1, 3) reversed
    report = json.loads((tmp_path / "order.json").read_text())
    assert [(record["ranks"], record["seed"]) for record in report["runs"]] == [(1, 0), (1, 2), (1, 3), (2, 0), (2, 2),
                                                                                 (2, 3)]
    assert report["missing_runs"] == [dict(ranks=1, seed=1), dict(ranks=2, seed=1)]


def test_report_only_without_any_evidence_says_so_in_one_line(tmp_path):
    """--report_only with an --out that holds no runs (a mistyped --out, say) names the folder it looked in,
    instead of a plotting traceback over no data."""
    result = run([PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                  "--ranks=1,2", "--seeds=0,1", "--target=475", "--budget_env_steps=100000", f"--workdir={tmp_path}",
                  f"--out={tmp_path / 'typo'}", "--report_only"], timeout=120, check=False)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"hvd_dqn.plan.scaling_study: error: --report_only: {tmp_path / 'typo'}_runs holds no evidence of these runs "
        "(ranks 1,2, seeds 0,1); train them first, without --report_only")
    assert not (tmp_path / "typo.json").exists() and not (tmp_path / "typo.png").exists()


def _hand_made_evidence(folder, episodes, provenance):
    """A finished run's evidence as the study keeps it: episodes (env steps, return, wall_s) of CartPole."""
    folder.mkdir(parents=True)
    rows = [f"{steps},{steps},0,0,{episode_return},{steps},{wall_s}" for steps, episode_return, wall_s in episodes]
    (folder / "episodes.csv").write_text("env_steps,env_frames,rank,env,return,length,wall_s\n" + "\n".join(rows))
    (folder / "metrics.csv").write_text("env_steps,env_frames,eval_return_mean\n")
    (folder / "config.json").write_text(json.dumps({"env_id": "CartPole-v1"}))
    (folder / "run.json").write_text(json.dumps(provenance))


def _two_hand_made_runs(evidence_root, cores_per_rank: int) -> None:
    """Seed 0 of CartPole's preset at 1 rank (the target of 10 over 2 episodes at 300 env steps, 3.0 s) and at 2
    ranks (at 150 env steps, 0.9 s), as a study with a budget of 400 keeps them."""
    study = _study_module()
    preset = (REPO / "configs" / "cartpole.flags").read_bytes()
    for ranks, episodes in ((1, [(100, 5.0, 1.0), (200, 10.0, 2.0), (300, 10.0, 3.0)]),
                            (2, [(100, 10.0, 0.5), (150, 10.0, 0.9)])):
        provenance = dict(flagfile="configs/cartpole.flags", flagfile_sha256=study.hashlib.sha256(preset).hexdigest()[:16],
                          preset_flags_sha256=study.preset_flags_digest(preset), extra_flags=[], job_num_envs=None,
                          cores_per_rank=cores_per_rank, budget_env_steps=400, ranks=ranks, seed=0, wall_s=9.0, parts=1)
        _hand_made_evidence(evidence_root / f"np{ranks}_seed0", episodes, provenance)


def test_the_time_mode_reports_wall_seconds_to_target_from_the_kept_evidence(tmp_path):
    """--cores_per_rank: each record carries it and its wall_s_to_target, and the summary the median seconds
    and their ratio to one rank's, all from episodes.csv's wall_s (a study of two hand-made runs)."""
    study = _study_module()
    out = tmp_path / "time"
    _two_hand_made_runs(tmp_path / "time_runs", cores_per_rank=1)
    command = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
               "--ranks=1,2", "--seeds=0", "--target=10", "--window=2", "--budget_env_steps=400",
               f"--workdir={tmp_path / 'runs'}", f"--out={out}", "--cores_per_rank=1", "--report_only"]
    if len(study.os.sched_getaffinity(0)) < 2:
        pytest.skip("two ranks of one core each need two cores")
    run(command, timeout=120)
    report = json.loads((tmp_path / "time.json").read_text())
    assert (report["cores_per_rank"], report["controller"]) == (1, "mpi")  # Gloo is the slow one on one host
    assert [(record["ranks"], record["cores_per_rank"], record["env_steps_to_target"], record["wall_s_to_target"])
            for record in report["runs"]] == [(1, 1, 300, 3.0), (2, 1, 150, 0.9)]
    assert [(row["median_wall_s_to_target"], row["wall_s_ratio_to_fewest_ranks"], row["env_steps_ratio_to_fewest_ranks"])
            for row in report["summary"]] == [(3.0, 1.0, 1.0), (0.9, 0.3, 0.5)]
    assert "compare" not in report  # bound ranks: the seconds are a speed figure
    # The same evidence is not taken for an unbound study's.
    unbound = run([arg for arg in command if arg != "--cores_per_rank=1"], timeout=120, check=False)
    assert unbound.returncode == 2 and "another cores_per_rank (cores_per_rank=1)" in unbound.stderr
    # More ranks than cores cannot be timed worker for worker.
    cores = len(study.os.sched_getaffinity(0))
    refused = run([*command[:4], f"--ranks=1,{cores + 1}", *command[5:]], timeout=120, check=False)
    assert refused.returncode == 2 and refused.stderr.strip() == (
        f"hvd_dqn.plan.scaling_study: error: --cores_per_rank=1: {cores + 1} ranks need {cores + 1} cores and this machine has "
        f"{cores}; wall time compares worker for worker only with a core (or more) for each")


def test_a_run_ended_at_the_target_reports_the_env_steps_of_the_run_trained_to_the_budget(tmp_path):
    """--stop_at_target ends each run at its first log point at or after the crossing: the env steps to the
    target are those of the same run trained to the whole budget, and the rest of the budget is not trained.
    Evidence made one way is not taken for the other's."""
    common = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
              "--ranks=1", "--seeds=0", "--target=40", "--window=10", "--budget_env_steps=6000"]
    extra = ["--", "--learning_starts=500", "--log_interval_env_steps=500"]
    run([*common, f"--workdir={tmp_path / 'whole'}", f"--out={tmp_path / 'whole'}", *extra], timeout=600)
    run([*common, f"--workdir={tmp_path / 'ended'}", f"--out={tmp_path / 'ended'}", "--stop_at_target", *extra],
        timeout=600)
    [whole] = json.loads((tmp_path / "whole.json").read_text())["runs"]
    ended_study = json.loads((tmp_path / "ended.json").read_text())
    [ended] = ended_study["runs"]
    assert whole["env_steps_to_target"] is not None, "the test needs a run that reaches its target"
    assert ended["env_steps_to_target"] == whole["env_steps_to_target"]
    assert ended_study["stop_at_target"] is True
    # the figure's return panel says when the return was taken: at the budget, or at the stop
    label = _study_module().final_return_label
    assert label(json.loads((tmp_path / "whole.json").read_text())).endswith("episodes at 6,000")
    assert label(ended_study).endswith("episodes at the stop")
    _, episodes = _study_module().read_run(str(tmp_path / ended["evidence"]))
    last = max(episode[0] for episode in episodes)
    assert ended["env_steps_to_target"] <= last < ended["env_steps_to_target"] + 500 + 8 < 6000
    mixed = run([*common, f"--workdir={tmp_path / 'whole'}", f"--out={tmp_path / 'whole'}", "--stop_at_target",
                 *extra], timeout=120, check=False)
    assert mixed.returncode == 2 and "another stop_at_target (stop_at_target=False)" in mixed.stderr


def test_an_unbound_study_gives_no_seconds_medians(tmp_path):
    """Ranks sharing the cores (--cores_per_rank=0): the records keep their clocks, but the summary gives no
    median seconds and no ratio of seconds, which would read as a speed figure."""
    _two_hand_made_runs(tmp_path / "shared_runs", cores_per_rank=0)
    run([PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
         "--ranks=1,2", "--seeds=0", "--target=10", "--window=2", "--budget_env_steps=400",
         f"--workdir={tmp_path / 'runs'}", f"--out={tmp_path / 'shared'}", "--report_only"], timeout=120)
    report = json.loads((tmp_path / "shared.json").read_text())
    assert [record["wall_s_to_target"] for record in report["runs"]] == [3.0, 0.9]
    assert [(row["median_wall_s_to_target"], row["wall_s_ratio_to_fewest_ranks"], row["env_steps_ratio_to_fewest_ranks"])
            for row in report["summary"]] == [(None, None, 1.0), (None, None, 0.5)]


def test_another_target_is_read_from_runs_stopped_at_a_higher_one_and_refused_above_it(tmp_path):
    """--evidence names the runs of another study: reported at a lower target, runs stopped at a higher one (they
    crossed it first); at a higher target, in one line, since where a run stopped says nothing of it."""
    study = _study_module()
    preset = (REPO / "configs" / "cartpole.flags").read_bytes()
    provenance = dict(flagfile="configs/cartpole.flags", flagfile_sha256=study.hashlib.sha256(preset).hexdigest()[:16],
                      preset_flags_sha256=study.preset_flags_digest(preset), extra_flags=[], job_num_envs=None,
                      cores_per_rank=0, budget_env_steps=400, stop_at_target=True, ranks=1, seed=0, wall_s=9.0,
                      parts=1)
    evidence = tmp_path / "to10_runs" / "np1_seed0"
    _hand_made_evidence(evidence, [(100, 4.0, 1.0), (200, 8.0, 2.0), (300, 12.0, 3.0)], provenance)
    (evidence / "config.json").write_text(json.dumps({"env_id": "CartPole-v1", "stop_at_train_return": 10.0,
                                                      "stop_train_episodes": 2}))
    command = [PYTHON, "-m", "hvd_dqn.plan.scaling_study", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
               "--ranks=1", "--seeds=0", "--window=2", "--budget_env_steps=400", "--stop_at_target",
               f"--workdir={tmp_path / 'runs'}", f"--evidence={tmp_path / 'to10_runs'}", "--report_only"]
    run([*command, "--target=6", f"--out={tmp_path / 'to6'}"], timeout=120)
    report = json.loads((tmp_path / "to6.json").read_text())
    assert [record["env_steps_to_target"] for record in report["runs"]] == [200]  # (4 + 8) / 2 >= 6
    refused = run([*command, "--target=11", f"--out={tmp_path / 'to11'}"], timeout=120, check=False)
    assert refused.returncode != 0 and not (tmp_path / "to11.json").exists()
    assert refused.stderr.strip().splitlines()[-1] == (
        f"hvd_dqn.plan.scaling_study: error: {evidence} holds a run stopped once 2 episodes averaged 10.0: it cannot "
        "say when 2 episodes first averaged 11.0; choose another --evidence")
