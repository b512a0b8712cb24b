"""Atari runs by game and agent against Dopamine's agents (python -m hvd_dqn.reports.suite), on hand-written runs."""
import json

from conftest import PYTHON, run
from written_runs import PNG_MAGIC, write_suite_run


def test_the_atari_suite_tables_each_game_and_agent_against_dopamines_same_agent(tmp_path):
    """Dopamine's published returns (google/dopamine baselines/atari/data/<game>_CNN.json), iteration 3: Pong DQN
    -13.7 [-16.0, -11.6], Rainbow -16.7, QR-DQN 7.4 [4.9, 10.1]; SpaceInvaders DQN 415.9, Rainbow 401.2;
    iteration 1 (250k-500k): Qbert Rainbow 450.8 [433.1, 476.9], DQN 464.0."""
    qrdqn, rainbow = {"agent": "qrdqn"}, {"agent": "c51", "n_step": 3, "prioritized_replay": True}
    runs = [write_suite_run(tmp_path / "pong0", "ALE/Pong-v5", 0, -10.0),
            write_suite_run(tmp_path / "pong1", "ALE/Pong-v5", 1, -16.0, seconds=5000.0),
            write_suite_run(tmp_path / "invaders0", "ALE/SpaceInvaders-v5", 0, 400.0),
            write_suite_run(tmp_path / "pong_qrdqn", "ALE/Pong-v5", 0, 5.0, config=qrdqn),
            write_suite_run(tmp_path / "qbert_rainbow", "ALE/Qbert-v5", 0, 440.0, config=rainbow, total=500_000)]
    out = tmp_path / "suite"
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", *runs, f"--out={out}"], timeout=120)
    lines = result.stdout.splitlines()
    assert ("| pong | PQN | 750k-1M | 2 | **-13.0** [-16.0, -10.0] | none published | - | -13.7 [-16.0, -11.6] | "
            "-16.7 [-19.6, -14.1] | yes | 250, 200 |") in lines  # 1M steps in 4,000 and 5,000 s
    assert ("| pong | QR-DQN | 750k-1M | 1 | **5.0** | QR-DQN: 7.4 [4.9, 10.1] | yes | -13.7 [-16.0, -11.6] | "
            "-16.7 [-19.6, -14.1] | yes | 250 |") in lines
    assert any(line.startswith("| spaceinvaders | PQN | 750k-1M | 1 | **400.0** | none published | - | 415.9")
               and line.endswith("| no | 250 |") for line in lines)
    assert any(line.startswith("| qbert | Rainbow | 250k-500k | 1 | **440.0** | Rainbow: 450.8 [433.1, 476.9] | yes "
                               "| 464.0") and line.endswith("| no | 250 |") for line in lines)
    assert "PQN: above Dopamine's DQN on 1 of 2 games, above its Rainbow on 1 of 2." in lines
    assert "QR-DQN: above Dopamine's DQN on 1 of 1 games, within or above the range of Dopamine's QR-DQN on 1 of 1." \
        in lines
    assert "Rainbow: above Dopamine's DQN on 0 of 1 games, within or above the range of Dopamine's Rainbow on 1 of 1." \
        in lines
    # Each game's best agent among all five of Dopamine's in its window: on Pong QR-DQN (5.0) is best, not PQN
    # (-13.0); Dopamine's 750k-1M means there C51 -20.5, IQN -5.3; Qbert's 250k-500k: C51 244.3, QR-DQN 698.9,
    # IQN 601.8; SpaceInvaders' 750k-1M: C51 214.9, QR-DQN 535.4, IQN 551.0.
    assert ("| pong | 750k-1M | QR-DQN | 5.0 | C51 -20.5, Rainbow -16.7, DQN -13.7, IQN -5.3 | QR-DQN 7.4 |"
            in lines)
    assert ("| spaceinvaders | 750k-1M | PQN | 400.0 | C51 214.9 | Rainbow 401.2, DQN 415.9, QR-DQN 535.4, IQN 551.0 |"
            in lines)
    assert ("| qbert | 250k-500k | Rainbow | 440.0 | C51 244.3 | Rainbow 450.8, DQN 464.0, IQN 601.8, QR-DQN 698.9 |"
            in lines)
    written = json.loads((tmp_path / "suite.json").read_text())
    assert [best["label"] for best in written["best"]] == ["QR-DQN", "PQN", "Rainbow"]
    assert written["agents"]["PQN"]["above_dqn"] == 1 and written["agents"]["QR-DQN"]["within_or_above_same"] == 1
    assert (tmp_path / "suite.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "suite.md").read_text().strip() == result.stdout.strip()


def test_the_atari_suite_refuses_runs_of_one_agent_in_different_windows(tmp_path):
    runs = [write_suite_run(tmp_path / "long", "ALE/Pong-v5", 0, -10.0),
            write_suite_run(tmp_path / "short", "ALE/Pong-v5", 1, -10.0, total=500_000)]
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", *runs, f"--out={tmp_path / 'suite'}"],
                 timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("python -m hvd_dqn.reports.suite: error: PQN on pong: runs of different windows "
                                     "(1, 3); give --window to compare them in one")


def test_the_atari_suite_refuses_a_run_short_of_the_window(tmp_path):
    folder = tmp_path / "short"
    write_suite_run(folder, "ALE/Pong-v5", 0, -10.0)
    metrics = folder / "metrics.csv"
    metrics.write_text("env_steps,env_frames,eval_return_mean\n600000,2400000,\n")
    episodes = (folder / "episodes.csv").read_text().splitlines()
    (folder / "episodes.csv").write_text("\n".join(episodes[:13]) + "\n")  # to 600k agent steps
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", str(folder), f"--out={tmp_path / 'suite'}"],
                 timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"python -m hvd_dqn.reports.suite: error: {folder}: the run did not reach the end "
                                     "of window 3 (1,000,000 agent steps)")
