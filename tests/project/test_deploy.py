"""deploy/: the MPIJob manifest checked offline against the Kubeflow MPI Operator's own CRD (kept in
deploy/mpi-operator/), strictly (an unknown field fails, as `kubectl apply --validate=strict` would), and the
command lines the manifest and the Dockerfile give hvd_dqn.train parsed by hvd_dqn's own flags. No cluster
runs here: this proves the files are well-formed and consistent, not that a cluster accepts the job."""
import copy
import re
import shlex

import jsonschema
import pytest
import yaml
from absl import flags

from hvd_dqn.flags import config_from_flags, define_flags

from conftest import REPO

DEPLOY = REPO / "deploy"


def _mpijob_schema():
    crd = yaml.safe_load((DEPLOY / "mpi-operator" / "kubeflow.org_mpijobs.yaml").read_text())
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == "MPIJob"
    (version,) = [version for version in crd["spec"]["versions"] if version["name"] == "v2beta1"]
    return version["schema"]["openAPIV3Schema"]


def _unknown_fields(document, schema, path="$"):
    """Paths of fields the schema does not declare. A structural Kubernetes schema lists an object's fields
    under `properties` (the API server prunes or, strictly, rejects any other) or types its values with
    `additionalProperties`; an object with neither (metadata) is checked by the API server itself."""
    found = []
    if isinstance(document, dict) and schema.get("type") == "object":
        if "properties" in schema:
            for key, value in document.items():
                if key not in schema["properties"]:
                    found.append(f"{path}.{key}")
                else:
                    found += _unknown_fields(value, schema["properties"][key], f"{path}.{key}")
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, value in document.items():
                found += _unknown_fields(value, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(document, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(document):
            found += _unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def _problems(job, schema):
    errors = [f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
              for error in jsonschema.Draft7Validator(schema).iter_errors(job)]
    return errors + [f"{field}: unknown field" for field in _unknown_fields(job, schema)]


def _documents():
    return list(yaml.safe_load_all((DEPLOY / "mpijob.yaml").read_text()))


def _mpijob():
    (job,) = [document for document in _documents() if document["kind"] == "MPIJob"]
    return job


def _train_config(arguments):
    """hvd_dqn.train's own flag parsing and validation of `arguments` (paths in the image mapped to the repo)."""
    values = flags.FlagValues()
    define_flags(values)
    values(["hvd_dqn.train"] + [argument.replace("/opt/hvd_dqn/", f"{REPO}/") for argument in arguments])
    return config_from_flags(values, check_logdir_writable=False)


def test_the_mpijob_manifest_is_valid_against_the_operators_crd():
    job = _mpijob()
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert _problems(job, _mpijob_schema()) == []
    replicas = job["spec"]["mpiReplicaSpecs"]
    assert set(replicas) == {"Launcher", "Worker"} and replicas["Launcher"]["replicas"] == 1


def test_the_validation_catches_a_misspelt_field_and_a_wrong_type():
    schema = _mpijob_schema()
    misspelt = copy.deepcopy(_mpijob())
    misspelt["spec"]["slotPerWorker"] = misspelt["spec"].pop("slotsPerWorker")
    assert _problems(misspelt, schema) == ["$.spec.slotPerWorker: unknown field"]
    wrong_type = copy.deepcopy(_mpijob())
    wrong_type["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert _problems(wrong_type, schema) == ["spec.mpiReplicaSpecs.Worker.replicas: 'two' is not of type 'integer'"]
    container = copy.deepcopy(_mpijob())
    container["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["comand"] = ["sshd"]
    assert _problems(container, schema) == [
        "$.spec.mpiReplicaSpecs.Worker.template.spec.containers[0].comand: unknown field"]


def test_the_launchers_command_is_one_hvd_dqn_train_accepts_for_the_workers_slots():
    job = _mpijob()
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    command = launcher["command"] + launcher["args"]
    assert command[0] == "mpirun"
    train_at = command.index("hvd_dqn.train")
    assert command[train_at - 2:train_at] == ["python", "-m"]
    ranks = int(command[command.index("-np") + 1])
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert ranks == workers["replicas"] * job["spec"]["slotsPerWorker"]
    config = _train_config(command[train_at + 1:])
    assert config.env_id == "ALE/Pong-v5" and config.checkpoint_replay and config.auto_resume
    # Each rank's thread share fits the worker's CPU limit.
    worker = workers["template"]["spec"]["containers"][0]
    assert config.intra_op_threads * job["spec"]["slotsPerWorker"] <= int(worker["resources"]["limits"]["cpu"])
    # The logdir is on the volume every worker mounts, a claim that many pods can write at once.
    (mount,) = worker["volumeMounts"]
    assert config.logdir.startswith(mount["mountPath"] + "/")
    (volume,) = workers["template"]["spec"]["volumes"]
    (claim,) = [document for document in _documents() if document["kind"] == "PersistentVolumeClaim"]
    assert volume["name"] == mount["name"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_the_workers_sshd_is_the_one_the_dockerfile_configures():
    job = _mpijob()
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["/usr/sbin/sshd"]
    config_file = worker["args"][worker["args"].index("-f") + 1]
    assert f"> {config_file}" in dockerfile
    # The operator mounts the job's keys where the image's sshd looks for its host key, as the image's user.
    host_key = re.search(r"HostKey (\S+?)\\n", dockerfile).group(1)
    assert host_key.startswith(job["spec"]["sshAuthMountPath"] + "/")
    user_id = int(re.search(r"useradd -m -u (\d+) mpiuser", dockerfile).group(1))
    for role in ("Launcher", "Worker"):
        container = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]
        assert container["securityContext"]["runAsUser"] == user_id
        assert container["image"] == worker["image"]


def test_the_dockerfiles_default_command_is_one_hvd_dqn_train_accepts():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, flags=re.MULTILINE)
    command = yaml.safe_load(cmd)  # a JSON array
    assert command[:3] == ["python", "-m", "hvd_dqn.train"]
    assert _train_config(command[3:]).env_id == "CartPole-v1"
    # Every file the build runs or copies from the repository exists.
    for path in re.findall(r"(scripts/\S+\.sh|configs/\S+\.flags)", dockerfile):
        assert (REPO / path).exists(), path


@pytest.mark.parametrize("bad, message", [
    (["--env_id=ALE/Pongg-v5"], "--env_id=ALE/Pongg-v5: unknown environment id"),
    (["--batch_size=0"], "--batch_size=0: must be a positive integer"),
])
def test_the_command_line_check_would_catch_a_bad_flag(bad, message):
    from hvd_dqn.config import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        _train_config(shlex.split("--flagfile=/opt/hvd_dqn/configs/pong.flags --logdir=/runs/x") + bad)
