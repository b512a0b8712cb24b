"""A real two-host job on this one machine: horovodrun launches the ranks through ssh on the loopback
addresses 127.0.0.2 and 127.0.0.3 (it treats them as remote hosts), once with Gloo and once with MPI.

The test starts an sshd of its own that listens only on those two addresses, on a free port, with its own
host key and client key in a temporary folder, and removes all of it afterwards (including the entries
ssh adds to ~/.ssh/known_hosts). Where that cannot be done (not root, no sshd), it skips with the reason.
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import pytest

from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, horovodrun, traced_by_rank, writes_under

HOSTS = ("127.0.0.2", "127.0.0.3")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
KNOWN_HOSTS = pathlib.Path.home() / ".ssh" / "known_hosts"


def _cannot_run_reason():
    if os.geteuid() != 0:
        return "needs root to start its own sshd that logs in as this user"
    if not os.path.exists(SSHD):
        return "no sshd here (Debian package openssh-server; scripts/setup.sh installs it)"
    for tool in ("ssh", "ssh-keygen", "strace"):
        if not shutil.which(tool):
            return f"no {tool} here"
    return None


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _wait_for_port(address: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"sshd did not listen on {address}:{port}")


@pytest.fixture(scope="module")
def loopback_sshd(tmp_path_factory):
    reason = _cannot_run_reason()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = _free_port(HOSTS[0])
    config = folder / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", *[f"ListenAddress {host}" for host in HOSTS],
        f"HostKey {folder / 'host_key'}", f"AuthorizedKeysFile {folder / 'authorized_keys'}",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "PermitRootLogin prohibit-password", f"PidFile {folder / 'sshd.pid'}", "LogLevel VERBOSE", ""]))
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation folder
    known_hosts_before = KNOWN_HOSTS.read_bytes() if KNOWN_HOSTS.exists() else None
    log = folder / "sshd.log"
    subprocess.run([SSHD, "-f", str(config), "-E", str(log)], check=True)
    try:
        for host in HOSTS:
            _wait_for_port(host, port)
        yield {"port": port, "key": folder / "client_key", "log": log}
    finally:
        pid_file = folder / "sshd.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        if known_hosts_before is None:
            KNOWN_HOSTS.unlink(missing_ok=True)
        else:
            KNOWN_HOSTS.write_bytes(known_hosts_before)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_two_host_job_over_ssh(tmp_path, loopback_sshd, controller):
    logdir, traces = tmp_path / "run", tmp_path / "traces"
    traces.mkdir()
    launch = ["-H", ",".join(f"{host}:1" for host in HOSTS), "--ssh-port", loopback_sshd["port"],
              "--ssh-identity-file", loopback_sshd["key"], "--network-interface", "lo"]
    if controller == "mpi":
        launch += ["--mpi-args=--allow-run-as-root"]
    train = [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", "--env_id=CartPole-v1", "--num_envs=2",
             "--total_env_steps=800", "--learning_starts=100", "--batch_size=32", "--train_frequency=2",
             "--hidden_sizes=32,32", "--log_interval_env_steps=400", "--eval_interval_env_steps=0"]
    result = horovodrun(2, launch + traced_by_rank(traces) + train, controller=controller, timeout=600)

    # The ranks were started through our sshd, on both addresses.
    sshd_log = loopback_sshd["log"].read_text()
    for host in HOSTS:
        assert f"on {host} port {loopback_sshd['port']}" in sshd_log, sshd_log[-3000:]
    assert "Accepted publickey" in sshd_log
    output = result.stdout + result.stderr
    assert "world: 2 ranks" in output
    if controller == "gloo":  # Gloo names the hosts as -H does (Open MPI reports the machine's hostname)
        assert "world: 2 ranks on 2 host(s)" in output and all(f"  {host}: rank" in output for host in HOSTS)

    # They trained as one: identical weights at the final checkpoint, which only rank 0 wrote.
    final = checkpoint.latest_checkpoint(str(logdir))
    counters = checkpoint.read_counters(final)
    assert counters["env_steps"] == 800 and counters["updates"] > 0 and counters["world_size"] == 2
    digests = counters["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert any("state.index" in line for line in writes_under(traces / "rank0.trace", logdir))
    assert writes_under(traces / "rank1.trace", logdir) == []
