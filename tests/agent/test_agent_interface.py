"""The line between the trainer and the agents: a fake agent that implements only `hvd_dqn.agent.interface.Agent`
drives the trainer through a run, a resume and a two-rank job (tests/mp/fake_agent_run.py); the factory builds
the agent a config names; and the config's agent is read in no more places than the factory, the validation and
the split over ranks."""
import json
import pathlib
import re

import numpy as np
import pytest

from conftest import MP_SCRIPTS, PYTHON, REPO, horovodrun, run
from hvd_dqn.agent.configs import make_config

FAKE = MP_SCRIPTS / "fake_agent_run.py"


def _report(out: pathlib.Path, rank: int = 0) -> dict:
    return json.loads((out / f"rank{rank}.json").read_text())


def test_a_fake_agent_drives_the_trainer_through_a_run_a_resume_and_two_ranks(tmp_path):
    logdir = tmp_path / "run"
    run([PYTHON, FAKE, f"--out={tmp_path / 'first'}", f"--logdir={logdir}"], timeout=300)
    first = _report(tmp_path / "first")
    # 400 env steps of 4 envs: 100 iterations, each stored and then learned from at the job's env steps.
    assert first["store"] == 100 and first["learn_env_steps"] == list(range(4, 401, 4))
    assert first["updates_made"] == first["counter_updates"] == 40  # one per 10 env steps, counted by the trainer
    assert first["join_world"] == [1] and first["closed"] and first["env_steps"] == 400
    metrics = (logdir / "metrics.csv").read_text().splitlines()
    columns = metrics[0].split(",")
    assert float(metrics[-1].split(",")[columns.index("learning_rate")]) == 0.5  # the agent's own step size
    assert len((logdir / "episodes.csv").read_text().splitlines()) > 10  # episodes told by the agent's `done`

    run([PYTHON, FAKE, f"--out={tmp_path / 'resumed'}", f"--logdir={logdir}", "--resume", "--total_env_steps=800"],
        timeout=300)
    resumed = _report(tmp_path / "resumed")
    # The checkpoint's items came back (40 updates), and training went on from 400 env steps.
    assert resumed["learn_env_steps"][0] == 404 and resumed["updates_made"] == 80 == resumed["counter_updates"]
    counters = json.loads(sorted((logdir / "checkpoints").glob("ckpt-*"))[-1].joinpath("counters.json").read_text())
    assert counters["rank_states"][0]["fake_own_steps"] == 0  # the agent's rank state, saved as it named it

    horovodrun(2, [PYTHON, FAKE, f"--out={tmp_path / 'two'}", f"--logdir={tmp_path / 'two_run'}"], timeout=300)
    for rank in (0, 1):
        report = _report(tmp_path / "two", rank)
        # Each rank steps 2 of the job's 4 envs: 100 iterations, and the same 20 collective updates on both.
        assert (report["size"], report["store"], report["updates_made"]) == (2, 100, 20)
        assert report["join_world"] == [2]
    assert _report(tmp_path / "two", 0)["weights"] == _report(tmp_path / "two", 1)["weights"]


@pytest.mark.parametrize("agent, memory_name", [("dqn", "replay memory"), ("pqn", "rollout")])
def test_the_factory_builds_the_agent_the_config_names(agent, memory_name):
    import horovod.tensorflow as hvd

    from hvd_dqn.agent.factory import make_agent
    from hvd_dqn.envs import EnvSpec

    class Metrics:
        def __init__(self):
            self.updates = []

        def record_update(self, metrics):
            self.updates.append(metrics)

    hvd.init()
    spec = EnvSpec((4,), np.float32, 2)
    memory = {"pqn": dict(rollout_steps=16, num_minibatches=2, update_epochs=1),
              "dqn": dict(learning_starts=64, batch_size=32, train_frequency=1, replay_capacity=1000)}[agent]
    config = make_config(agent=agent, num_envs=2, hidden_sizes=(8,), elastic=False, **memory)
    built = make_agent(config, spec, 2, 1000, 1, np.random.default_rng(0), Metrics())
    try:
        assert built.memory_name == memory_name
        assert built.synchronized_variables[0] is built.online.variables[0]
        names = set(built.checkpoint_items())
        assert names == ({"online", "target", "optimizer", "num_updates"} if agent == "dqn"
                         else {"online", "optimizer", "num_updates"})
        built.join_world(1)
        actor = built.make_actor(np.random.default_rng(1), own_network=False)
        assert actor.q_network is built.online
    finally:
        built.close()


def test_the_config_agent_is_read_only_to_look_it_up_in_the_registry():
    """The factory (building it, what is asked of it), the config's making and validation (its settings) and the
    resume check (the settings that shape its checkpoint) read --agent, each to ask the registry; nothing else reads
    it."""
    readers = {str(path.relative_to(REPO)): path.read_text() for path in (REPO / "hvd_dqn").rglob("*.py")
               if re.search(r"config\.agent\b", path.read_text())}
    assert sorted(readers) == ["hvd_dqn/agent/configs.py", "hvd_dqn/agent/factory.py", "hvd_dqn/run/save_restore.py"]
    for path, text in readers.items():
        uses = re.findall(r"[\w.]*\(?[\w.]*config\.agent\b", text)
        assert uses and all(re.match(r"(registry\.\w+|settings_class)\(config\.agent", use) for use in uses), \
            (path, uses)
