"""The memory pre-flight (hvd_dqn/run/memory_check.py): its arithmetic against memories actually built, what
a host has available, the verdict for the ranks on a host, and the refusal and warning as a user sees them."""

import numpy as np
import pytest

from hvd_dqn.agent.configs import make_config
from hvd_dqn.config import ConfigError
from hvd_dqn.envs import EnvSpec
from hvd_dqn.run import memory_check
from hvd_dqn.run.horovod_setup import World
from hvd_dqn.agent.dqn.agent import make_replay_memory
from hvd_dqn.agent.factory import memory_bytes

from conftest import REPO, python_module

CARTPOLE = EnvSpec((4,), np.dtype(np.float32), 2)
ATARI = EnvSpec((4, 84, 84), np.dtype(np.uint8), 4)
MINATAR = EnvSpec((10, 10, 4), np.dtype(np.bool_), 6)


def _allocated_bytes(memory) -> int:
    """Every array the memory holds, as allocated (the sum tree's nodes included)."""
    arrays = [value for value in vars(memory).values() if isinstance(value, np.ndarray)]
    tree = getattr(memory, "_tree", None)
    return sum(array.nbytes for array in arrays) + (tree._nodes.nbytes if tree is not None else 0)


@pytest.mark.parametrize("spec", [CARTPOLE, ATARI, MINATAR], ids=["vectors", "frames", "bit-packed grids"])
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritised"])
def test_the_computed_bytes_are_those_of_the_memory_once_built(spec, prioritized):
    config = make_config(prioritized_replay=prioritized, n_step=3)
    capacity, num_envs = 30_000, 4
    computed = memory_bytes(config, spec, num_envs, capacity)
    built = _allocated_bytes(make_replay_memory(config, spec, num_envs, capacity))
    # The per-env write counters and the env index are the only arrays that do not grow with the capacity.
    assert built - 200 <= computed <= built


def test_a_frame_memory_of_a_million_transitions_is_about_seven_gigabytes():
    computed = memory_bytes(make_config(), ATARI, 4, 1_000_000)
    assert 7.0e9 < computed < 7.2e9  # 7,068 bytes per transition: one 84x84 frame and the step's fields


def test_the_verdict_counts_every_rank_on_the_host_and_the_shared_libraries_once():
    gib = memory_check.GIB
    per_rank = 5 * gib  # + half a GiB each, and half a GiB for the host's shared libraries
    assert memory_check.verdict(per_rank, 1, (24 * gib, "MemAvailable")) == ("ok", 6 * gib)
    assert memory_check.verdict(per_rank, 3, (24 * gib, "MemAvailable")) == ("ok", 17 * gib)
    assert memory_check.verdict(per_rank, 4, (24 * gib, "MemAvailable")) == ("warn", 22.5 * gib)  # above 80%
    assert memory_check.verdict(per_rank, 5, (24 * gib, "MemAvailable")) == ("refuse", 28 * gib)
    assert memory_check.verdict(per_rank, 5, None) == ("ok", 28 * gib)  # nothing readable: no check
    assert memory_check.verdict(per_rank, 4, (24 * gib, "MemAvailable"), margin=gib) == ("refuse", 24.5 * gib)


def test_thirty_two_small_ranks_fit_on_a_24_gib_host_and_atari_ranks_get_the_larger_margin():
    """32 CartPole ranks hold about 0.3 GiB each and share 0.4 GiB of libraries (results/memory/): a budget of a
    GiB per rank refused them on a host with 22 GiB available."""
    gib = memory_check.GIB
    cartpole = make_config(env_id="CartPole-v1")
    replay = memory_bytes(cartpole, CARTPOLE, 1, 100_000 // 32)
    status, needed = memory_check.verdict(replay, 32, (22 * gib, "MemAvailable"), memory_check.rank_margin(cartpole))
    assert status == "ok" and 16.5 * gib < needed < 16.6 * gib
    assert memory_check.rank_margin(make_config(env_id="ALE/Breakout-v5")) > memory_check.rank_margin(cartpole)
    assert memory_check.rank_margin(make_config(env_id="MinAtar/Breakout-v0")) == memory_check.rank_margin(cartpole)


def test_available_memory_is_the_smaller_of_memavailable_and_the_cgroups_room(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       25165824 kB\nMemAvailable:   20971520 kB\n")
    v2, v1, unlimited = tmp_path / "v2", tmp_path / "v1", tmp_path / "unlimited"
    v2.mkdir()
    (v2 / "memory.max").write_text(f"{8 * 2**30}\n")
    (v2 / "memory.current").write_text(f"{2 * 2**30}\n")
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(f"{40 * 2**30}\n")
    (v1 / "memory" / "memory.usage_in_bytes").write_text(f"{1 * 2**30}\n")
    (unlimited / "memory").mkdir(parents=True)
    (unlimited / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (unlimited / "memory" / "memory.usage_in_bytes").write_text("1000\n")
    assert memory_check.available_bytes(str(meminfo), str(v2)) == (6 * 2**30, "the memory cgroup's limit")
    assert memory_check.available_bytes(str(meminfo), str(v1)) == (20 * 2**30, "MemAvailable")
    assert memory_check.available_bytes(str(meminfo), str(unlimited)) == (20 * 2**30, "MemAvailable")
    assert memory_check.available_bytes(str(tmp_path / "none"), str(tmp_path / "none")) is None


def test_what_the_ranks_hold_already_is_added_back_to_the_hosts_lowest_reading(tmp_path):
    """The check runs after every rank has imported TensorFlow and built its envs: MemAvailable has lost what
    they hold, and counting it again refused 32 CartPole ranks that fit (15.7 GiB left of 23.9)."""
    smaps = tmp_path / "smaps_rollup"
    smaps.write_text("Rss:              700000 kB\nPrivate_Dirty:    300000 kB\nAnonymous:        262144 kB\n")
    assert memory_check.held_bytes(str(smaps)) == 2**28
    assert memory_check.held_bytes(str(tmp_path / "none")) == 0
    gib = memory_check.GIB
    readings = [("a", (16 * gib, "MemAvailable"), gib // 4)] * 31 + [("a", (15 * gib, "MemAvailable"), gib // 4),
                                                                      ("b", (20 * gib, "MemAvailable"), gib),
                                                                      ("c", None, gib)]
    rooms = memory_check.host_room(readings)
    assert rooms["a"] == (32, (23 * gib, "MemAvailable and the 8.0 GiB its ranks hold already"))
    assert rooms["b"] == (1, (21 * gib, "MemAvailable and the 1.0 GiB its ranks hold already"))
    assert rooms["c"] == (1, None)


def _one_host(monkeypatch, available, ranks_on_host=1):
    """check_memory_fits on a world of `ranks_on_host` ranks on one host that has `available` bytes, each rank
    reading the same (no Horovod collective)."""
    monkeypatch.setattr(memory_check, "available_bytes", lambda: (available, "MemAvailable"))
    monkeypatch.setattr(memory_check, "held_bytes", lambda: 0)
    from hvd_dqn import collectives

    monkeypatch.setattr(collectives, "barrier", lambda name: None)
    monkeypatch.setattr(collectives, "gather_objects", lambda value, name: [value] * ranks_on_host)
    return World(rank=0, size=ranks_on_host, local_rank=0, local_size=ranks_on_host, hostname="node1",
                 controller="MPI")


def test_a_job_that_does_not_fit_is_refused_naming_the_flag_the_bytes_and_the_remedies(monkeypatch):
    world = _one_host(monkeypatch, 24 * 2**30, ranks_on_host=4)
    config = make_config(env_id="ALE/Breakout-v5", counts_per_rank=True, replay_capacity=1_000_000)
    with pytest.raises(ConfigError) as refused:
        memory_check.check_memory_fits(config, ATARI, 4, 1_000_000, world)
    assert str(refused.value) == (
        "--replay_capacity=1000000: the replay memories need 29.8 GiB on node1 (4 rank(s) x (6.6 GiB of replay + "
        "0.75 GiB for TensorFlow and the emulators) + 0.5 GiB of libraries the ranks share) and 24.0 GiB is "
        "available (MemAvailable); use fewer ranks per "
        "host, --nocounts_per_rank (which splits --replay_capacity over the ranks) or a smaller "
        "--replay_capacity")


def test_a_job_near_the_limit_is_warned_about(monkeypatch):
    world = _one_host(monkeypatch, 9 * 2**30, ranks_on_host=1)
    warnings = []
    monkeypatch.setattr(memory_check.logging, "warning", lambda text, *args: warnings.append(text % args))
    config = make_config(env_id="ALE/Breakout-v5", replay_capacity=1_000_000)  # split already: no such remedy
    memory_check.check_memory_fits(config, ATARI, 4, 1_000_000, world)  # 7.8 of 9 GiB
    memory_check.check_memory_fits(config, ATARI, 4, 100_000, world)  # 1.9 of 9 GiB: nothing said
    assert warnings == ["memory is tight (above 80% of what is available): --replay_capacity=1000000: the replay "
                        "memories need 7.8 GiB on node1 (1 rank(s) x (6.6 GiB of replay + 0.75 GiB for TensorFlow "
                        "and the emulators) + 0.5 GiB of libraries the ranks share) and 9.0 GiB is available "
                        "(MemAvailable); use a smaller --replay_capacity"]


def test_training_that_cannot_fit_stops_at_start_up_with_one_line(tmp_path):
    """A trillion-transition memory used to die in NumPy's allocator with a traceback."""
    result = python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / 'breakout_dopamine.flags'}",
                                             "--replay_capacity=1000000000000", f"--logdir={tmp_path}"],
                           timeout=300, check=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("hvd_dqn.train: error: --replay_capacity=1000000000000: the replay memories need "), \
        lines[0]
    assert "GiB is available" in lines[0] and lines[0].endswith("; use a smaller --replay_capacity")


def test_under_horovodrun_the_ranks_on_a_host_are_counted_and_rank_0_alone_reports(tmp_path):
    """Two ranks of half a terabyte each (CartPole's vectors, --counts_per_rank): refused before either
    allocates, in one line from rank 0 that counts both ranks and offers the mode that splits the memory."""
    from conftest import PYTHON, horovodrun

    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                            "--counts_per_rank", "--replay_capacity=10000000000", f"--logdir={tmp_path}"],
                        timeout=300, check=False)
    output = result.stdout + result.stderr
    reports = [line for line in output.splitlines() if "error: --replay_capacity=10000000000: " in line]
    assert result.returncode != 0 and len(reports) == 1 and reports[0].startswith("[0]"), output[-3000:]
    assert " GiB on " in reports[0] and "(2 rank(s) x (" in reports[0], reports[0]
    assert reports[0].endswith("use fewer ranks per host, --nocounts_per_rank (which splits --replay_capacity "
                               "over the ranks) or a smaller --replay_capacity"), reports[0]
    # horovodrun adds its own report of the failed job; the ranks print no traceback and allocate nothing.
    assert not [line for line in output.splitlines() if line.startswith(("[0]", "[1]")) and "Traceback" in line]
    assert "MemoryError" not in output


def test_under_elastic_each_worker_answers_for_its_own_host(monkeypatch):
    """A worker joining an elastic job builds its trainer while the others train: no collective may wait for
    them (one did, and the joining worker hung)."""
    world = _one_host(monkeypatch, 9 * 2**30)
    from hvd_dqn import collectives

    def no_collective(value, name):
        raise AssertionError(f"a collective ({name}) under --elastic")

    monkeypatch.setattr(collectives, "gather_objects", no_collective)
    config = make_config(elastic=True, rank_scaling="batch", replay_capacity=2_000_000)
    with pytest.raises(ConfigError, match="--replay_capacity=2000000: the replay memories need 14.2 GiB"):
        memory_check.check_memory_fits(config, ATARI, 4, 2_000_000, world)
    memory_check.check_memory_fits(config.replace(replay_capacity=100_000), ATARI, 4, 100_000, world)
