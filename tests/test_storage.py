"""Object-store logdirs against a real S3 server: moto's, started on 127.0.0.1 by these tests and stopped by
them. A trained run's logdir copied to s3:// is evaluated, exported and plotted from there exactly as from
the local folder; incomplete checkpoints are skipped; a missing bucket or missing credentials is one line."""
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, horovodrun, python_module, run

BUCKET = "hvd-dqn-test"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """A moto S3 server on loopback; the AWS variables of this process (and so of every subprocess the tests
    start) point at it while the module runs."""
    port = _free_port()
    server = subprocess.Popen([str(pathlib.Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved = {name: os.environ.get(name) for name in
             ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("moto_server did not start")
                time.sleep(0.2)
        import s3fs

        s3fs.S3FileSystem(skip_instance_cache=True).mkdir(BUCKET)
        yield f"s3://{BUCKET}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def stored_run(s3_server, tmp_path_factory):
    """A short CartPole run with checkpoints at 1,000 and 2,000 env steps, trained locally and copied to
    s3://.../runs/cartpole as `aws s3 sync` would."""
    import s3fs

    logdir = tmp_path_factory.mktemp("storage") / "run"
    horovodrun(1, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", "--env_id=CartPole-v1", "--num_envs=2",
                   "--learning_starts=200", "--batch_size=32", "--train_frequency=4", "--hidden_sizes=32,32",
                   "--total_env_steps=2000", "--checkpoint_interval_env_steps=1000", "--log_interval_env_steps=500",
                   "--eval_interval_env_steps=0"], timeout=300)
    url = f"{s3_server}/runs/cartpole"
    s3fs.S3FileSystem(skip_instance_cache=True).put(str(logdir), url.removeprefix("s3://"), recursive=True)
    return logdir, url


def _evaluate(logdir, tmp_path, name):
    report = tmp_path / f"{name}.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=4", f"--json={report}"], timeout=300)
    return json.loads(report.read_text())


def test_a_stored_run_evaluates_as_its_local_copy(stored_run, tmp_path):
    local, url = stored_run
    remote, here = _evaluate(url, tmp_path, "remote"), _evaluate(local, tmp_path, "local")
    assert remote["env_steps"] == here["env_steps"] == 2000
    assert remote["returns"] == here["returns"]  # the same weights, seeds and episodes


def test_a_stored_checkpoint_without_its_complete_marker_is_skipped(stored_run, tmp_path):
    import s3fs

    local, url = stored_run
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    copy = f"{url}-incomplete"
    fs.copy(url.removeprefix("s3://"), copy.removeprefix("s3://"), recursive=True)
    fs.rm(f"{copy.removeprefix('s3://')}/checkpoints/ckpt-000000002000/COMPLETE")
    assert _evaluate(copy, tmp_path, "incomplete")["env_steps"] == 1000


def test_a_stored_run_exports_and_plots(stored_run, tmp_path):
    local, url = stored_run
    python_module("hvd_dqn.export", [f"--logdir={url}", f"--out={tmp_path / 'policy'}"], timeout=300)
    info = json.loads((tmp_path / "policy" / "hvd_dqn_policy.json").read_text())
    assert info["env_steps"] == 2000 and info["env_id"] == "CartPole-v1"
    run([PYTHON, REPO / "scripts" / "plot_curves.py", f"cartpole={url}", f"--out={tmp_path / 'curve.png'}",
         "--window=5"], timeout=120)
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_missing_bucket_run_or_credentials_are_one_line(stored_run, tmp_path):
    _, url = stored_run
    cases = [
        ("s3://no-such-bucket-here/runs/x", {}, "--logdir=s3://no-such-bucket-here/runs/x: no complete checkpoint"),
        (f"{url}-never-written", {}, f"--logdir={url}-never-written: no complete checkpoint under "
                                     f"{url}-never-written/checkpoints"),
    ]
    for logdir, _, message in cases:
        result = python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2"], timeout=120, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith(f"hvd_dqn.evaluate: error: {message}"), result.stderr
