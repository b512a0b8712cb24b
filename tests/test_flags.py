"""Bad settings end the program with exit code 2 and one clear line naming the flag, never a traceback."""

import pytest

from hvd_dqn.agent.configs import config_from_json, make_config, validate
from hvd_dqn.config import ConfigError, TrainConfig

from conftest import PYTHON, REPO, horovodrun, python_module


def _error_line(result):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("flags, expected", [
    (["--batch_size=-1"], "hvd_dqn.train: error: --batch_size=-1: must be a positive integer"),
    (["--env_id=CartPol-v1"], "hvd_dqn.train: error: --env_id=CartPol-v1: unknown environment id; "
                              "did you mean CartPole-v1"),
    (["--learning_starts=60000", "--replay_capacity=50000"],
     "hvd_dqn.train: error: --learning_starts=60000: must be <= --replay_capacity=50000"),
    (["--gamma=1.5"], "hvd_dqn.train: error: --gamma=1.5: must be a discount factor in [0, 1]"),
    (["--hidden_sizes=64,x"], "hvd_dqn.train: error: --hidden_sizes=64,x: must be a comma-separated list"),
    (["--batch_size=abc"], "hvd_dqn.train: error: flag --batch_size=abc: invalid literal for int()"),
    (["--no_such_flag=1"], "hvd_dqn.train: error: Unknown command line flag 'no_such_flag'"),
    (["--flagfile=/nonexistent/x.flags"], "hvd_dqn.train: error: --flagfile=/nonexistent/x.flags: no such file; the "
                                          "presets in configs/ are atari_smoke.flags, breakout.flags, "),
    (["--flagfile=configs/cartpol.flags"], "hvd_dqn.train: error: --flagfile=configs/cartpol.flags: no such file; did "
                                           "you mean configs/cartpole.flags? the presets in configs/ are "),
    (["--pipeline_lead_env_steps=-2"], "hvd_dqn.train: error: --pipeline_lead_env_steps=-2: must be an integer >= 0 "
                                       "(env steps of the job), or -1 for two updates' worth"),
    (["--pipeline=yes"], "hvd_dqn.train: error: --pipeline=yes: must be one of auto, on, off"),
    (["--pipeline_sync_updates=0"], "hvd_dqn.train: error: --pipeline_sync_updates=0: must be a positive integer"),
    (["--elastic", "--rank_scaling=updates"], "hvd_dqn.train: error: --rank_scaling=updates: splits the job's "
                                              "--batch_size over a fixed number of ranks, which --elastic does not "
                                              "have; add --rank_scaling=batch (the default, which --elastic runs in)"),
])
def test_bad_flag_gives_one_clear_line(tmp_path, flags, expected):
    line = _error_line(python_module("hvd_dqn.train", [f"--logdir={tmp_path}"] + flags, timeout=120, check=False))
    assert line.startswith(expected), line


def test_unwritable_logdir_is_named(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = python_module("hvd_dqn.train", [f"--logdir={blocker}/logs"], timeout=120, check=False)
    assert _error_line(result).startswith(f"hvd_dqn.train: error: --logdir={blocker}/logs: not a writable folder")


def test_later_flags_override_the_flagfile(tmp_path):
    flagfile = tmp_path / "base.flags"
    flagfile.write_text("--batch_size=32\n--learning_starts=16\n")
    result = python_module("hvd_dqn.train", [f"--flagfile={flagfile}", "--batch_size=64", f"--logdir={tmp_path}"],
                           timeout=120, check=False)
    assert _error_line(result).endswith("--batch_size=64: must be <= --learning_starts=16, so the first "
                                        "minibatch can be drawn")


def test_under_horovodrun_only_rank_0_reports(tmp_path):
    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", "--batch_size=0", f"--logdir={tmp_path}"],
                        timeout=120, check=False)
    assert result.returncode != 0
    reports = [line for line in (result.stdout + result.stderr).splitlines()
               if "error: --batch_size=0: must be a positive integer" in line]
    assert len(reports) == 1, result.stdout + result.stderr
    assert reports[0].startswith("[0]")
    # horovodrun adds its own summary of the failed job; the ranks themselves print no traceback.
    assert not [line for line in (result.stdout + result.stderr).splitlines()
                if line.startswith(("[0]", "[1]")) and "Traceback" in line]
    # Nor does the launcher's own import of TensorFlow (the venv's hvd_dqn_quiet_tensorflow.pth, scripts/setup.sh).
    assert "Unable to register" not in result.stdout + result.stderr, result.stderr


@pytest.mark.parametrize("launcher", ["horovodrun", "mpirun"])
def test_a_bare_open_mpi_launcher_told_to_keep_quiet_prints_the_one_line(tmp_path, launcher):
    """docs/clusters.md: under `OMPI_MCA_orte_execute_quiet=1` a bare `horovodrun -np 2` (Open MPI) or `mpirun -np 2`
    prints rank 0's line alone for a bad setting, exit code 2; without it the launcher adds its own account."""
    from conftest import _horovodrun, environment, run

    launch = {"horovodrun": [_horovodrun(), "-np", "2", "--mpi"], "mpirun": ["mpirun", "-np", "2"]}[launcher]
    command = [*launch, PYTHON, "-m", "hvd_dqn.train", "--flagfile=configs/cartpole.flags", "--learning_starts=999999",
               f"--logdir={tmp_path / 'run'}"]
    expected = ("hvd_dqn.train: error: --learning_starts=999999: must be <= --replay_capacity=100000 (both count "
                "transitions: the job's, or each rank's with --counts_per_rank or --elastic)")
    loud = run(command, timeout=180, check=False)
    with environment(OMPI_MCA_orte_execute_quiet="1"):
        quiet = run(command, timeout=180, check=False)
    lines = [line for line in (quiet.stdout + quiet.stderr).splitlines() if line.strip()]
    assert quiet.returncode == 2 and len(lines) == 1 and lines[0].endswith(expected), quiet.stdout + quiet.stderr
    assert loud.returncode == 2 and expected in loud.stderr and len((loud.stdout + loud.stderr).splitlines()) > 5
    assert not (tmp_path / "run" / "config.json").exists()


@pytest.mark.parametrize("np_, flags, expected", [
    (2, ["--batch_size=-32"], "hvd_dqn.train: error: --batch_size=-32: must be a positive integer"),
    (3, [], "hvd_dqn.train: error: --num_envs=8 (the job's envs) must split evenly over the 3 ranks"),
], ids=["bad-value", "world-does-not-split"])
def test_scripts_train_sh_says_a_bad_setting_in_one_line_at_any_number_of_ranks(tmp_path, np_, flags, expected):
    """What a user types: `NP=2 scripts/train.sh --batch_size=-32`. The settings are checked for the job's ranks in
    one process first (--check_ranks), so the line stands alone: no rank's copy of it, no launcher's report, no
    TensorFlow import chatter (the horovodrun launcher's included)."""
    from conftest import environment, run

    with environment(NP=str(np_), FLAGFILE="configs/cartpole.flags"):
        result = run(["bash", str(REPO / "scripts" / "train.sh"), f"--logdir={tmp_path / 'run'}", *flags],
                     timeout=180, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines()
             if line.strip() and not line.startswith("[setup] already set up")]
    assert len(lines) == 1 and lines[0].startswith(expected), result.stdout + result.stderr


def test_check_ranks_accepts_a_job_that_splits_and_trains_nothing(tmp_path):
    result = python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                                             f"--logdir={tmp_path / 'run'}", "--check_ranks=4"], timeout=120)
    assert result.returncode == 0 and not (tmp_path / "run" / "checkpoints").exists()


def test_a_resume_of_a_logdir_that_does_not_exist_is_one_line_and_leaves_no_folder(tmp_path):
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path / 'missing' / 'run'}", "--resume"], timeout=120,
                           check=False)
    assert _error_line(result) == (f"hvd_dqn.train: error: --resume: --logdir={tmp_path / 'missing' / 'run'} does "
                                   "not exist, so it holds no run to continue; leave --resume out to start one there "
                                   "(or --auto_resume: continue if it holds one, else start)")
    assert not (tmp_path / "missing").exists()


def test_defaults_are_valid_and_each_field_is_checked(tmp_path):
    config = make_config(logdir=str(tmp_path))
    assert validate(config) is config
    for field, bad in [("num_envs", 0), ("epsilon_end", 1.5), ("learning_rate", 0.0), ("max_grad_norm", -1.0),
                       ("keep_checkpoints", 0), ("eval_interval_env_steps", -5), ("seed", -1)]:
        with pytest.raises(ConfigError, match=f"^--{field}="):
            validate(config.replace(**{field: bad}))


def test_resume_without_a_checkpoint_is_named(tmp_path):
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path}", "--resume"], timeout=120, check=False)
    assert _error_line(result) == f"hvd_dqn.train: error: --resume: no complete checkpoint under {tmp_path}/checkpoints"


def test_resume_with_another_network_is_refused(tmp_path):
    from hvd_dqn.logdir import checkpoint

    saved = make_config(logdir=str(tmp_path), hidden_sizes=(32,))
    checkpoint.save(str(tmp_path), {}, {"env_steps": 100, "episodes": 1, "updates": 1}, saved.to_json(), keep=1)
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path}", "--resume", "--hidden_sizes=64,64"],
                           timeout=120, check=False)
    assert _error_line(result).endswith("was written with --hidden_sizes=(32,) (this run: (64, 64)); use another "
                                        "--logdir or the same settings")


def test_resuming_another_agents_run_names_the_agent_not_the_settings_only_one_of_them_read(tmp_path):
    """A C51 run resumed with the QR-DQN preset differs in --agent; its 51 atoms and the preset's 10 quantiles are
    settings neither run shares, so the line does not name them. The run's files are left as they were."""
    from hvd_dqn.logdir import checkpoint

    saved = make_config(logdir=str(tmp_path), agent="c51", num_atoms=51, hidden_sizes=(256, 256), double_dqn=True)
    checkpoint.save(str(tmp_path), {}, {"env_steps": 100, "episodes": 1, "updates": 1}, saved.to_json(), keep=1)
    before = sorted((path.name, path.stat().st_mtime_ns) for path in tmp_path.rglob("*"))
    result = python_module("hvd_dqn.train", ["--flagfile=configs/cartpole_qrdqn.flags", f"--logdir={tmp_path}",
                                             "--resume"], timeout=120, check=False)
    assert _error_line(result).endswith("was written with --agent='c51' (this run: 'qrdqn'); use another --logdir "
                                        "or the same settings")
    assert sorted((path.name, path.stat().st_mtime_ns) for path in tmp_path.rglob("*")) == before


def test_resume_in_the_other_rank_scaling_mode_is_refused(tmp_path):
    """A run begun while `updates` was the default, resumed without --rank_scaling=updates, would change what
    each rank's updates are mid-run; it is refused with the setting to add."""
    from hvd_dqn.logdir import checkpoint

    saved = make_config(logdir=str(tmp_path), rank_scaling="updates")
    checkpoint.save(str(tmp_path), {}, {"env_steps": 100, "episodes": 1, "updates": 1}, saved.to_json(), keep=1)
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path}", "--resume"], timeout=120, check=False)
    assert _error_line(result).endswith("was written with --rank_scaling='updates' (this run: 'batch'); use "
                                        "another --logdir or the same settings")


def test_resume_of_a_batch_run_with_per_rank_counts_needs_counts_per_rank(tmp_path):
    """A `batch` run written before --counts_per_rank existed had each rank's own envs and memory: its
    config.json reads as --counts_per_rank, and a resume without the flag is refused naming it."""
    from hvd_dqn.logdir import checkpoint

    written = make_config(logdir=str(tmp_path)).to_json().replace('  "counts_per_rank": false,\n', "")
    assert "counts_per_rank" not in written
    checkpoint.save(str(tmp_path), {}, {"env_steps": 100, "episodes": 1, "updates": 1}, written, keep=1)
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path}", "--resume"], timeout=120, check=False)
    assert _error_line(result).endswith("was written with --counts_per_rank=True (this run: False); use "
                                        "another --logdir or the same settings")


def test_configs_written_before_the_defaults_changed_keep_their_meaning():
    """Before --rank_scaling, each rank updated on its own envs and memory: that is `batch` with per-rank
    counts; before version 0.1.3 the scaling rules were off unless written, and batch counted per rank."""
    fields = ("rank_scaling", "counts_per_rank", "scale_lr_by_workers", "scale_schedules_by_workers")
    assert tuple(getattr(make_config(), name) for name in fields) == ("batch", False, True, True)
    assert config_from_json(make_config().to_json()) == make_config()

    def written_without(config, *names):
        text = config.to_json()
        for name in names:
            text = "\n".join(line for line in text.splitlines() if f'"{name}"' not in line)
        return config_from_json(text.replace(",\n}", "\n}"))

    oldest = written_without(make_config(), *fields)
    assert tuple(getattr(oldest, name) for name in fields) == ("batch", True, False, False)
    updates = written_without(make_config(rank_scaling="updates"), *fields[1:])
    assert tuple(getattr(updates, name) for name in fields) == ("updates", False, False, False)


def _preset(name):
    from absl import flags

    from hvd_dqn.flags import config_from_flags, define_flags

    flag_values = flags.FlagValues()
    define_flags(flag_values)
    flag_values(["hvd_dqn.train", f"--flagfile={REPO / 'configs' / name}"])
    return config_from_flags(flag_values, check_logdir_writable=False)


@pytest.mark.parametrize("name", sorted(path.name for path in (REPO / "configs").glob("*.flags")))
def test_every_preset_is_valid(name):
    assert _preset(name).logdir.startswith("runs/")


@pytest.mark.parametrize("name, env_id", [("pong.flags", "ALE/Pong-v5"), ("breakout.flags", "ALE/Breakout-v5"),
                                           ("pong_rainbow_lite.flags", "ALE/Pong-v5")])
def test_atari_presets_follow_the_published_protocol(name, env_id):
    config = _preset(name)
    assert config.env_id == env_id and config.double_dqn and config.clip_rewards and config.terminal_on_life_loss
    assert (config.repeat_action_probability, config.noop_max, config.max_episode_frames) == (0.25, 30, 108_000)
    assert (config.batch_size, config.train_frequency, config.gamma) == (32, 4, 0.99)
    assert config.total_env_steps == 10_000_000 and config.replay_capacity == 250_000


def test_each_preset_says_how_its_ranks_share_the_updates(tmp_path):
    """Every preset scales over ranks with bigger batches, the linear rule and schedules on one rank's clock
    (the default, chosen by time to a score); the long Atari presets and the smoke run keep each rank's own envs
    and memory, the rest split the job's. The elastic command in docs/resume.md must validate."""
    from hvd_dqn.rank_split import learns_from_replay

    per_rank = ("pong.flags", "breakout.flags", "pong_rainbow_lite.flags", "atari_smoke.flags")
    for path in sorted((REPO / "configs").glob("*.flags")):
        config = _preset(path.name)
        assert (config.scale_lr_by_workers, config.lr_scale_rule, config.scale_schedules_by_workers) == \
            (True, "linear", True), path.name
        if learns_from_replay(config):  # PQN's ranks share its minibatches by --pqn_minibatches
            assert config.rank_scaling == "batch", path.name
        assert config.counts_per_rank == (path.name in per_rank), path.name
    from absl import flags

    from hvd_dqn.flags import config_from_flags, define_flags

    flag_values = flags.FlagValues()
    define_flags(flag_values)
    flag_values(["hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'pong.flags'}", "--elastic", f"--logdir={tmp_path}"])
    assert config_from_flags(flag_values).elastic


def test_the_dopamine_preset_has_dopamines_protocol_and_hyperparameters():
    """google/dopamine: dopamine/jax/agents/dqn/configs/dqn.gin and the JaxDQNAgent defaults."""
    config = _preset("breakout_dopamine.flags")
    assert config.env_id == "ALE/Breakout-v5" and config.clip_rewards
    # Sticky actions, no no-ops, no FIRE at reset, a lost life is not terminal, 27k-step episodes.
    assert (config.repeat_action_probability, config.noop_max, config.fire_reset) == (0.25, 0, False)
    assert not config.terminal_on_life_loss and config.max_episode_frames == 108_000
    assert (config.learning_rate, config.adam_epsilon, config.max_grad_norm) == (6.25e-5, 1.5e-4, 0.0)
    assert config.loss == "mse" and not (config.double_dqn or config.dueling or config.prioritized_replay)
    assert (config.batch_size, config.train_frequency, config.gamma, config.n_step) == (32, 4, 0.99, 1)
    # target_update_period 8,000 agent steps = 2,000 updates at one update per 4 steps
    assert config.target_update_period * config.train_frequency == 8_000
    assert (config.learning_starts, config.replay_capacity) == (20_000, 1_000_000)
    assert (config.epsilon_start, config.epsilon_end) == (1.0, 0.01)
    assert (config.epsilon_decay_start_env_steps, config.epsilon_decay_env_steps) == (20_000, 250_000)
    assert config.eval_epsilon == 0.001 and config.total_env_steps == 1_000_000
    assert (config.network, config.conv_padding) == ("nature_cnn", "same")  # dopamine/jax/networks.py


def test_the_minatar_distributional_presets_have_revisiting_rainbows_hyperparameters():
    """JohanSamir/revisiting_rainbow, Configs/quantile_breakout.gin and rainbow_breakout.gin (Obando-Ceron and
    Castro 2021), with google/dopamine's JaxDQNAgent defaults for the epsilon schedule; the network, the envs and
    the game are the MinAtar DQN preset's."""
    qrdqn, c51, dqn = _preset("minatar_qrdqn.flags"), _preset("minatar_c51.flags"), _preset("minatar.flags")
    for config in (qrdqn, c51):
        assert (config.env_id, config.network, config.clip_rewards) == (dqn.env_id, dqn.network, dqn.clip_rewards)
        assert (config.optimizer, config.learning_rate, config.adam_epsilon, config.max_grad_norm) == \
            ("adam", 1e-4, 3.125e-4, 0.0)
        assert (config.batch_size, config.train_frequency, config.gamma, config.n_step) == (32, 4, 0.99, 3)
        assert config.target_update_period * config.train_frequency == 1_000  # agent steps, as the gins count
        assert (config.learning_starts, config.replay_capacity) == (1_000, 100_000)
        assert (config.epsilon_start, config.epsilon_end, config.epsilon_decay_env_steps) == (1.0, 0.01, 250_000)
        assert not (config.double_dqn or config.dueling or config.noisy_nets)
    assert (qrdqn.agent, qrdqn.num_quantiles, qrdqn.kappa, qrdqn.prioritized_replay) == ("qrdqn", 51, 1.0, False)
    assert (c51.agent, c51.num_atoms, c51.v_max, c51.prioritized_replay) == ("c51", 51, 100.0, True)
    assert (c51.priority_alpha, c51.priority_beta_start, c51.priority_beta_end) == (0.5, 0.5, 0.5)


def test_the_best_breakout_preset_keeps_dopamines_environment_protocol_and_compute():
    best, dopamine = _preset("breakout_best.flags"), _preset("breakout_dopamine.flags")
    protocol = ("env_id", "repeat_action_probability", "noop_max", "fire_reset", "terminal_on_life_loss",
                "clip_rewards", "max_episode_frames", "total_env_steps", "batch_size", "train_frequency",
                "num_envs", "learning_starts", "eval_epsilon")
    assert [getattr(best, name) for name in protocol] == [getattr(dopamine, name) for name in protocol]
    assert best.double_dqn and best.dueling and best.n_step == 3


def test_variants_are_off_by_default_and_on_in_the_rainbow_lite_preset():
    default = make_config()
    assert not (default.double_dqn or default.dueling or default.prioritized_replay) and default.n_step == 1
    config = _preset("pong_rainbow_lite.flags")
    assert config.double_dqn and config.dueling and config.prioritized_replay and config.n_step == 3
    assert (config.priority_alpha, config.priority_beta_start) == (0.5, 0.4)


@pytest.mark.parametrize("flags, expected", [
    (["--n_step=0"], "--n_step=0: must be an integer from 1 to 100"),
    (["--loss=l1"], "--loss=l1: must be one of huber, mse"),
    (["--target_update_tau=0"], "--target_update_tau=0.0: must be in (0, 1] (1 copies the online network)"),
    (["--rank_scaling=both"], "--rank_scaling=both: must be one of batch, updates"),
    (["--learning_rate_end=0.0001"],
     "--learning_rate_end=0.0001: needs --lr_decay_updates > 0 (the updates over which the step size decays to it)"),
    (["--lr_decay_updates=5000"], "--lr_decay_updates=5000: needs --learning_rate_end (the step size to decay to)"),
    (["--learning_rate_end=-1", "--lr_decay_updates=5"], "--learning_rate_end=-1.0: must be a number >= 0"),
    (["--optimizer=sgd"], "--optimizer=sgd: must be one of adam, rmsprop"),
    (["--epsilon_decay_start_env_steps=-5"], "--epsilon_decay_start_env_steps=-5: must be an integer >= 0"),
    (["--priority_alpha=1.5"], "--priority_alpha=1.5: must be in [0, 1]"),
    (["--priority_beta_start=-0.1"], "--priority_beta_start=-0.1: must be in [0, 1]"),
])
def test_bad_variant_flags_are_named(tmp_path, flags, expected):
    line = _error_line(python_module("hvd_dqn.train", [f"--logdir={tmp_path}"] + flags, timeout=120, check=False))
    assert line.startswith(f"hvd_dqn.train: error: {expected}"), line


def test_evaluate_names_a_missing_or_incomplete_checkpoint(tmp_path):
    (tmp_path / "checkpoints" / "ckpt-000000001000").mkdir(parents=True)  # written, never marked COMPLETE
    for args, message in [
        ([f"--logdir={tmp_path}"], f"--logdir={tmp_path}: no complete checkpoint under {tmp_path / 'checkpoints'}"),
        ([f"--logdir={tmp_path / 'missing'}"], f"--logdir={tmp_path / 'missing'}: no such folder"),
        ([f"--checkpoint={tmp_path / 'checkpoints' / 'ckpt-000000001000'}"],
         f"--checkpoint={tmp_path / 'checkpoints' / 'ckpt-000000001000'}: not a complete checkpoint folder "
         "(no COMPLETE marker)"),
        ([], "--logdir: required (or --checkpoint)"),
    ]:
        result = python_module("hvd_dqn.evaluate", args, timeout=120, check=False)
        assert _error_line(result) == f"hvd_dqn.evaluate: error: {message}"


def test_help_lists_the_flags_a_user_sets_by_task_and_helpfull_lists_every_flag():
    from hvd_dqn.flags import USER_FLAGS, setting_names

    names = [name for _, group in USER_FLAGS for name in group]
    assert len(names) == len(set(names)) and 15 <= len(names) <= 30
    fields = set(setting_names())  # the config's and every registered agent's own
    assert {"env_id", "num_quantiles", "rollout_steps", "num_atoms"} <= fields
    assert set(names) <= fields
    short = python_module("hvd_dqn.train", ["--help"], timeout=60)
    assert short.returncode == 0, short.stderr
    listed = [line.split(":")[0].strip()[2:] for line in short.stdout.splitlines() if line.startswith("  --")]
    assert listed == names  # in the order of the groups, nothing else
    for group, _ in USER_FLAGS:
        assert f"\n{group}:\n" in short.stdout
    assert f"These are {len(names)} of hvd_dqn.train's {len(fields)} flags; --helpfull" in " ".join(
        short.stdout.split())
    full = python_module("hvd_dqn.train", ["--helpfull"], timeout=60, check=False)
    assert full.returncode == 0, full.stderr  # absl's own --helpfull exits 1, as if it had failed
    for name in fields:
        assert f"--{name}:" in full.stdout or f"--[no]{name}:" in full.stdout, name


def test_the_pong_pqn_preset_is_the_breakout_one_with_the_game_changed():
    """One PQN preset for every Atari game: configs/pong_pqn.flags differs from configs/breakout_pqn.flags in the
    game and the run's folder only, comments aside."""
    def settings(name):
        lines = (REPO / "configs" / name).read_text().splitlines()
        return [line for line in lines if line.strip() and not line.startswith("#")]

    breakout, pong = settings("breakout_pqn.flags"), settings("pong_pqn.flags")
    changed = [(old, new) for old, new in zip(breakout, pong) if old != new]
    assert len(breakout) == len(pong) and changed == [("--env_id=ALE/Breakout-v5", "--env_id=ALE/Pong-v5"),
                                                      ("--logdir=runs/breakout_pqn", "--logdir=runs/pong_pqn")]
