"""Object-store logdirs against real S3 and GCS servers: moto's and gcp-storage-emulator's, started on 127.0.0.1
by these tests and stopped by them. A trained run's logdir copied to s3:// is evaluated, exported and plotted from there exactly as from
the local folder; incomplete checkpoints are skipped; two ranks train into s3:// with replay shards and
resume exactly from it; a missing bucket or missing credentials is one line."""
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, environment, horovodrun, python_module, run, subprocess_env

BUCKET = "hvd-dqn-test"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_moto_server():
    """(process, port) of a moto S3 server listening on 127.0.0.1, once it accepts connections."""
    return _start_server(lambda port: ["moto_server", "-H", "127.0.0.1", "-p", str(port)])


def _start_server(command_for_port):
    """(process, port) of the server that command_for_port(port) starts from the venv's bin folder, once it
    accepts connections on 127.0.0.1:port."""
    port = _free_port()
    command = command_for_port(port)
    server = subprocess.Popen([str(pathlib.Path(sys.executable).parent / command[0]), *command[1:]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail(f"{command[0]} did not start")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def s3_server():
    """A moto S3 server on loopback; the AWS variables of this process (and so of every subprocess the tests
    start) point at it while the module runs."""
    server, port = _start_moto_server()
    try:
        with environment(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                         AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}"):
            import s3fs

            s3fs.S3FileSystem(skip_instance_cache=True).mkdir(BUCKET)
            yield f"s3://{BUCKET}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def gcs_server():
    """A GCS server on loopback (gcp-storage-emulator, in memory), which gcsfs reaches through
    STORAGE_EMULATOR_HOST, set for this process and its subprocesses while the module runs. gcsfs 2026.7
    first asks GCS's gRPC control API whether a bucket is hierarchical, which the emulator does not serve
    (a 60 s time-out per bucket): GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false skips that question."""
    server, port = _start_server(lambda port: ["gcp-storage-emulator", "start", "--host=127.0.0.1", f"--port={port}",
                                               "--in-memory"])
    try:
        with environment(STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}", GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false"):
            from hvd_dqn.logdir import storage

            fs, _ = storage.open_store(f"gs://{BUCKET}")
            fs.mkdir(BUCKET)
            yield f"gs://{BUCKET}"
    finally:
        server.terminate()
        server.wait(timeout=30)


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
    run([PYTHON, "-m", "hvd_dqn.reports.curves", f"cartpole={url}", f"--out={tmp_path / 'curve.png'}",
         "--window=5"], timeout=120)
    assert (tmp_path / "curve.png").stat().st_size > 0
    remote, here = (run([PYTHON, "-m", "hvd_dqn.reports.score", logdir, "--per=500"], timeout=120).stdout.splitlines()
                    for logdir in (url, local))
    assert remote[0].startswith(f"{url}: CartPole-v1,") and remote[1:] == here[1:]  # the same score and windows
    assert len(here) == 1 + 2 + 4 and here[3].startswith("| 0-500 |"), here  # 2,000 env steps by 500


def _without_aws_credentials(monkeypatch, tmp_path):
    """This process and its subprocesses find no AWS credentials anywhere (and do not wait for an
    instance-metadata service to say so)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def _last_error_line(result) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def test_missing_bucket_run_or_credentials_are_one_line(stored_run, tmp_path, monkeypatch):
    _, url = stored_run
    cases = [
        ("s3://no-such-bucket-here/runs/x", "--logdir=s3://no-such-bucket-here/runs/x: no complete checkpoint"),
        (f"{url}-never-written", f"--logdir={url}-never-written: no complete checkpoint under "
                                 f"{url}-never-written/checkpoints"),
    ]
    for logdir, message in cases:
        result = python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2"], timeout=120, check=False)
        assert result.returncode == 2, result.stderr
        assert _last_error_line(result).startswith(f"hvd_dqn.evaluate: error: {message}"), result.stderr

    # The readers of a stored run, without credentials: botocore's own error, named in one line by each.
    _without_aws_credentials(monkeypatch, tmp_path)
    reason = "(Unable to locate credentials)"
    evaluate = python_module("hvd_dqn.evaluate", [f"--logdir={url}", "--episodes=2"], timeout=120, check=False)
    assert _last_error_line(evaluate) == (
        f"hvd_dqn.evaluate: error: --logdir={url}: cannot list its checkpoints {reason}")
    for module, args in (("hvd_dqn.reports.curves", [f"run={url}", f"--out={tmp_path / 'curve.png'}"]),
                         ("hvd_dqn.reports.score", [url])):
        result = run([PYTHON, "-m", module, *args], timeout=120, check=False)
        assert _last_error_line(result).endswith(f"{url}: cannot read it {reason}"), (module, result.stderr[-3000:])


# Two ranks, one update per env step of each rank from 1,000 transitions per rank, no stop rule (as in
# test_reliability.py, so the counts below do not move with the preset's tuning).
TRAIN_TO_STORE = [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                  "--eval_interval_env_steps=0", "--rank_scaling=batch", "--counts_per_rank", "--noscale_lr_by_workers",
                  "--noscale_schedules_by_workers", "--num_envs=4", "--train_frequency=1",
                  "--batch_size=64", "--stop_at_train_return=inf", "--checkpoint_replay", "--prioritized_replay",
                  "--checkpoint_interval_env_steps=1500", "--log_interval_env_steps=500", "--keep_checkpoints=2"]


def _stored(url):
    from hvd_dqn.logdir import storage

    return storage.open_store(url)


@pytest.mark.parametrize("store", ["s3_server", "gcs_server"], ids=["s3", "gs"])
def test_two_ranks_train_into_a_store_resume_exactly_from_it_and_evaluate_from_it(store, request, tmp_path):
    url = f"{request.getfixturevalue(store)}/train/cartpole"
    fs, root = _stored(url)
    horovodrun(2, [*TRAIN_TO_STORE, f"--logdir={url}", "--total_env_steps=3000"], timeout=600)
    # The logs and both checkpoints are objects; each checkpoint holds both ranks' replay shards.
    names = {path.rsplit("/", 1)[1] for path in fs.ls(root)}
    assert {"config.json", "metrics.csv", "episodes.csv", "checkpoints"} <= names
    assert any(name.startswith("events.out.tfevents") for name in names)
    assert [path.rsplit("/", 1)[1] for path in fs.ls(f"{root}/checkpoints")] == ["ckpt-000000001504",
                                                                                 "ckpt-000000003000"]
    newest = f"{root}/checkpoints/ckpt-000000003000"
    assert {"COMPLETE", "counters.json", "config.json", "replay-rank00000.npz", "replay-rank00001.npz"} <= {
        path.rsplit("/", 1)[1] for path in fs.ls(newest)}
    saved = json.loads(fs.cat_file(f"{newest}/counters.json"))
    assert saved["env_steps"] == 3000 and saved["updates"] == 504
    assert len(set(saved["replica_weight_digests"])) == 1
    rows_before = fs.cat_file(f"{root}/metrics.csv").decode().count("\n")
    if store == "gcs_server":
        # Reading a checkpoint back out of GCS: the evaluation. The resume reads through the same store
        # interface and, with its replay shards, is the longer job: it runs once, against the S3 server.
        assert _evaluate(url, tmp_path, "trained-in-store")["env_steps"] == 3000
        return

    # Resume from the store alone (the ranks' local mirrors are gone with their processes).
    result = horovodrun(2, [*TRAIN_TO_STORE, f"--logdir={url}", "--total_env_steps=4500", "--resume"], timeout=600)
    log = result.stdout + result.stderr
    assert f"resumed from {url}/checkpoints/ckpt-000000003000" in log
    restored = re.search(r"replay memories restored \(transitions per rank \[\d+, \d+\]; digests \['(\w+)', '(\w+)'\]\)", log)
    assert restored, log[-3000:]
    assert list(restored.groups()) == [state["replay_digest"] for state in saved["rank_states"]]  # bit for bit
    assert "restored replay digests" not in log  # the trainer's own comparison found no difference
    final = json.loads(fs.cat_file(f"{root}/checkpoints/ckpt-000000004504/counters.json"))
    assert final["env_steps"] == 4504 and final["updates"] == 504 + 188 * 4  # no refill: exact continuation
    # --keep_checkpoints=2 holds in the store; metrics.csv was appended to, not replaced.
    assert [path.rsplit("/", 1)[1] for path in fs.ls(f"{root}/checkpoints")] == ["ckpt-000000003000",
                                                                                 "ckpt-000000004504"]
    assert fs.cat_file(f"{root}/metrics.csv").decode().count("\n") > rows_before

    report = _evaluate(url, tmp_path, "trained-in-store")
    assert report["env_steps"] == 4504 and len(report["returns"]) == 4


def test_training_into_a_missing_bucket_or_without_credentials_is_one_line(s3_server, tmp_path, monkeypatch):
    args = [*TRAIN_TO_STORE[3:], "--total_env_steps=2000"]  # one process, no launcher: its whole output is ours

    def error_line(logdir):
        result = python_module("hvd_dqn.train", [*args, f"--logdir={logdir}"], timeout=300, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
        return result.stderr.strip().splitlines()[-1]

    assert error_line("s3://no-such-bucket-here/run").startswith(
        "hvd_dqn.train: error: --logdir=s3://no-such-bucket-here/run: cannot write there (")
    _without_aws_credentials(monkeypatch, tmp_path)
    assert error_line(f"{s3_server}/run-without-credentials") == (
        f"hvd_dqn.train: error: --logdir={s3_server}/run-without-credentials: cannot write there (Unable to locate "
        "credentials)")


def test_training_into_a_missing_gcs_bucket_is_one_line(gcs_server, tmp_path):
    result = python_module("hvd_dqn.train", [*TRAIN_TO_STORE[3:], "--total_env_steps=2000",
                                             "--logdir=gs://no-such-bucket-here/run"], timeout=300, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        "hvd_dqn.train: error: --logdir=gs://no-such-bucket-here/run: cannot write there (not found: http://127.0.0.1:"), result.stderr[-3000:]


def test_a_store_that_goes_away_stops_the_job_at_its_next_checkpoint_with_one_line(s3_server, tmp_path, monkeypatch):
    """The store answers at start-up (the probe passes, the first logs are uploaded), then its server stops:
    the log uploads only warn, and the next checkpoint ends the job with one line."""
    import s3fs

    server, port = _start_moto_server()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # botocore's retries, so the failure comes within seconds
        s3fs.S3FileSystem(skip_instance_cache=True).mkdir("vanishing")
        command = [PYTHON, "-m", "hvd_dqn.train", *TRAIN_TO_STORE[3:], "--logdir=s3://vanishing/run",
                   "--total_env_steps=100000", "--checkpoint_interval_env_steps=6000", "--log_interval_env_steps=1000"]
        job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=subprocess_env(), cwd=REPO)
        output = []
        for line in job.stdout:  # the first progress line: the probe passed and the first logs were uploaded
            output.append(line)
            if "env steps 1,000/" in line:
                break
        server.terminate()
        server.wait(timeout=30)
        rest, _ = job.communicate(timeout=300)
    finally:
        if server.poll() is None:
            server.kill()
        if "job" in locals() and job.poll() is None:
            job.kill()
    lines = ("".join(output) + rest).strip().splitlines()
    assert job.returncode == 2 and not [line for line in lines if "Traceback" in line], lines[-20:]
    assert any("the next log point tries again" in line for line in lines), lines[-20:]  # a warning, not a stop
    # With --checkpoint_replay rank 0's first store operation of a checkpoint is clearing its COMPLETE marker.
    assert lines[-1].startswith("hvd_dqn.train: error: checkpoint at 6,000 env steps in s3://vanishing/run/"
                                "checkpoints failed: rank 0 could not prepare it (s3://vanishing/run: cannot read its "
                                "checkpoints (Could not connect to the endpoint URL"), lines[-5:]
    assert lines[-1].endswith("; the earlier checkpoints are intact")
