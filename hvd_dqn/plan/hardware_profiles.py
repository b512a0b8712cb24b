"""Hardware profiles: what one GPU (or one CPU rank) and its host cost per part of a training step, the figures
the cost model predicts GPU jobs from (hvd_dqn/plan/cost_formula.py).

A profile holds measured parts, each with its source:
- the update by batch size with the batch already on the device (DQN's and PQN's), and from host memory
  (DQN's, the copy included), and the host-to-device copy's bytes per second; with whose update the DQN tables
  timed (`update_timed`: the agent, its network and the settings that change its arithmetic), so that the cost
  model prices another preset's update against that one, and the observations every part was timed on
  (`observation_shape`): a preset on other observations (CartPole's against an Atari profile) is refused;
- one greedy forward pass by the number of envs in the call (a GPU pays per call, not per env);
- the emulators' agent steps per second by the number of envs (one thread per env up to the host's cores);
- three host costs the isolated parts leave out, which a plain loop of acting and learning shows: a fixed cost
  per vector step (the Python loop, epsilon-greedy, the env call), a cost per agent step (writing it into
  replay or the rollout) and a cost per byte gathered from host memory into a batch (random rows of a replay
  far larger than any cache);
- the gradient exchange: Horovod's negotiation per update and the ring's links within and between nodes;
- the plain loops measured end to end on that hardware, which the model must reproduce (`validation_rows`).

The model of a GPU's work from a profile is `hvd_dqn.plan.gpu_costs`. Two profiles are built in: "h200-16core" (measured on one NVIDIA H200 with a 16-core Xeon host, 2026) and
"gtx1080-2016" (two figures derived from Daley & Amato 2021's GTX 1080 runs, the model's earlier anchor).
`python -m hvd_dqn.plan.calibrate` writes a profile of the machine it runs on, in the same JSON form.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Dict, List, Optional, Tuple

from hvd_dqn.text import listed

# 2: `update_timed` says whose update the DQN tables timed (version 1 profiles did not: `calibrate` timed its
# preset's, the built-in ones plain DQN's, and nothing told them apart).
# 3: `update_timed` names the network too, and `observation_shape` the observations (version 2 profiles did not: a
# profile calibrated on CartPole's MLP lent its update times to an Atari preset's CNN).
PROFILE_VERSION = 3

# The update the built-in profiles' DQN tables timed: DQN's on the Nature CNN with valid padding (Mnih et al. 2015),
# without double DQN, dueling heads, noisy layers or LayerNorm (hvd_dqn.measure.update_costs.update_settings's form).
PLAIN_DQN_UPDATE = {"agent": "dqn", "network": "nature_cnn", "conv_padding": "valid", "double_dqn": False,
                    "dueling": False, "noisy_nets": False, "layer_norm": False}
# What the built-in profiles timed on: 4 stacked 84x84 frames (hvd_dqn's Atari observations, frames first).
ATARI_OBSERVATIONS = (4, 84, 84)


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Loop:
    """A plain loop measured end to end: acting (vector steps of `num_envs`) then learning, one after the other.
    DQN: `updates_per_vector_step` updates of `batch_size`; PQN: `rollout_steps` vector steps, then
    `updates_per_rollout` minibatch updates of `batch_size`."""
    agent: str
    num_envs: int
    batch_size: int
    agent_steps_per_s: float
    updates_per_vector_step: float = 0.0
    rollout_steps: int = 0
    updates_per_rollout: int = 0
    label: str = ""


@dataclasses.dataclass(frozen=True)
class Exchange:
    """The gradient exchange of one update: Horovod's negotiation and the ring's links."""
    negotiation_ms: float
    intra_node_bytes_per_s: float
    intra_node_latency_us: float
    inter_node_bytes_per_s: float
    inter_node_latency_us: float


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    name: str
    description: str
    host_cores: int
    update_device_ms: Dict[int, float]  # DQN update, batch on the device
    update_host_ms: Dict[int, float]  # DQN update, batch (two observations per sample) shipped from the host
    pqn_update_device_ms: Dict[int, float]  # PQN minibatch update, batch on the device
    forward_ms: Dict[int, float]  # one greedy forward pass for `envs` observations, host -> device -> host
    emulator_steps_per_s: Dict[int, float]  # agent steps/s of `envs` emulators, one thread each up to the cores
    copy_bytes_per_s: float  # host -> device; 0: not measured (then PQN's update cannot be modelled)
    host_call_ms: float  # per vector step, beyond the forward pass and the emulators
    host_store_ms: float  # per agent step
    host_gather_ns_per_byte: float  # per byte of a batch gathered from host memory
    host_draw_ms: float  # per batch drawn from host memory, whatever its size
    exchange: Exchange
    loops: Tuple[Loop, ...] = ()
    sources: Dict[str, str] = dataclasses.field(default_factory=dict)
    # whose update update_device_ms and update_host_ms timed: {"agent": ..., setting: value, ...}
    update_timed: Dict[str, object] = dataclasses.field(default_factory=lambda: dict(PLAIN_DQN_UPDATE))
    observation_shape: Tuple[int, ...] = ATARI_OBSERVATIONS  # one observation of every part timed
    machine: Dict[str, object] = dataclasses.field(default_factory=dict)  # what calibrate ran on

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        for table in TABLES:
            data[table] = {str(key): value for key, value in sorted(data[table].items())}
        data["loops"] = [dataclasses.asdict(loop) for loop in self.loops]
        data["observation_shape"] = list(self.observation_shape)
        data["version"] = PROFILE_VERSION
        return data


TABLES = ("update_device_ms", "update_host_ms", "pqn_update_device_ms", "forward_ms", "emulator_steps_per_s")
SCALARS = ("copy_bytes_per_s", "host_call_ms", "host_store_ms", "host_gather_ns_per_byte", "host_draw_ms")


# --- the built-in profiles ----------------------------------------------------------------------------------------

H200_SOURCE = ("measured on one NVIDIA H200 with a 16-core Xeon host, JAX 0.11.2 / XLA, 2026-11-27 (the project's "
               "GPU measurements, docs/gpus.md)")

H200_16CORE = HardwareProfile(
    name="h200-16core",
    description="one NVIDIA H200 (141 GB) with 16 cores of an Intel Xeon host; Nature CNN, fp32",
    host_cores=16,
    update_device_ms={32: 0.66, 64: 0.82, 128: 0.94, 256: 0.69, 512: 0.87, 1024: 1.45, 2048: 2.59},
    update_host_ms={32: 1.15, 64: 1.42, 128: 1.85, 256: 2.17, 512: 2.92, 1024: 6.25, 2048: 13.46},
    pqn_update_device_ms={64: 1.08, 128: 0.69, 256: 1.09, 512: 1.03, 1024: 1.37},
    forward_ms={1: 0.73, 4: 0.80, 8: 0.78, 16: 0.69, 64: 0.75, 128: 1.08, 256: 1.50, 1024: 4.45},
    emulator_steps_per_s={1: 1447, 4: 3555, 16: 8015, 64: 10072, 128: 13311},
    # (13.46 - 2.59) ms for 2,048 x 2 x 28,224 B: what shipping the batch adds to the update on the device
    copy_bytes_per_s=2048 * 2 * 28224 / 10.87e-3,
    # fit_host_costs on the six loops below (a test recomputes them)
    host_call_ms=0.9097,
    host_store_ms=0.07323,
    host_gather_ns_per_byte=0.7276,
    host_draw_ms=0.0,  # not told apart from the bytes by six loops
    exchange=Exchange(negotiation_ms=1.0, intra_node_bytes_per_s=450e9, intra_node_latency_us=5.0,
                      inter_node_bytes_per_s=50e9, inter_node_latency_us=4.0),
    loops=(
        Loop("dqn", 16, 32, 1194, updates_per_vector_step=4, label="DQN, 16 envs, batch 32, 4 updates per step"),
        Loop("dqn", 16, 128, 1326, updates_per_vector_step=1, label="DQN, 16 envs, batch 128, 1 update per step"),
        Loop("dqn", 64, 512, 1618, updates_per_vector_step=1, label="DQN, 64 envs, batch 512, 1 update per step"),
        Loop("pqn", 128, 128, 4329, rollout_steps=32, updates_per_rollout=64,
             label="PQN, 128 envs x 32 steps, 32 minibatches x 2 epochs"),
        Loop("pqn", 8, 256, 1411, rollout_steps=128, updates_per_rollout=16,
             label="PQN, 8 envs x 128 steps, 4 minibatches x 4 epochs"),
        Loop("pqn", 16, 512, 2914, rollout_steps=128, updates_per_rollout=16,
             label="PQN, 16 envs x 128 steps, 4 minibatches x 4 epochs"),
    ),
    sources={
        "update_device_ms": H200_SOURCE + ": one DQN update (online and target forward, Huber, Adam), batch on "
                            "the device",
        "update_host_ms": H200_SOURCE + ": the same update with the batch (two uint8 stacks of 28,224 B per "
                          "sample) shipped from NumPy memory each update",
        "pqn_update_device_ms": H200_SOURCE + ": one PQN minibatch update (Nature CNN with LayerNorm, RAdam, "
                                "clip 10), batch on the device",
        "forward_ms": H200_SOURCE + ": one greedy forward pass, host -> GPU -> argmax on the host",
        "emulator_steps_per_s": H200_SOURCE + ": ale-py's AtariVectorEnv, Breakout, DQN preprocessing, random "
                                "actions, one thread per env up to 16",
        "copy_bytes_per_s": "derived: the update from the host less the update on the device at batch 2,048 "
                            "(10.87 ms for 115.6 MB)",
        "host_call_ms": "fitted: least squares of the model's six loops against the measured ones "
                        "(gpu_costs.fit_host_costs)",
        "host_store_ms": "fitted, as host_call_ms",
        "host_gather_ns_per_byte": "fitted, as host_call_ms (41 us per DQN sample of 56,448 B)",
        "host_draw_ms": "not fitted: six loops do not tell a cost per batch apart from its bytes; in "
                        "host_gather_ns_per_byte",
        "negotiation_ms": "Horovod 0.28.1's default cycle time, 1 ms (horovod/common/operations.cc, "
                          "SetCycleTimeMs(1)); a Horovod timeline of 2 CPU ranks over MPI measured 1.06 ms",
        "intra_node_bytes_per_s": "NVIDIA H200 SXM: fourth-generation NVLink, 18 links, 900 GB/s in all, i.e. "
                                  "450 GB/s each way; NVSwitch connects every pair of a DGX H200's 8 GPUs",
        "intra_node_latency_us": "an assumption (a few microseconds per NCCL step on NVLink); it changes the "
                                 "8-GPU figures by under 0.1 ms",
        "inter_node_bytes_per_s": "NVIDIA DGX H100/H200: one ConnectX-7 400 Gb/s NDR InfiniBand port per GPU, "
                                  "50 GB/s each",
        "inter_node_latency_us": "Mellanox, 'InfiniBand In-Network Computing Technology' (2019): communication "
                                 "latencies of 3-4 us",
        "loops": H200_SOURCE + ": plain loops, acting then learning with no overlap, random initial weights, a "
                 "host replay of 200,000 stacks, agent steps/s over 20 s after warm-up",
    },
)

GTX1080_SOURCE = ("Daley & Amato 2021, 'Human-level control without server-grade hardware' (arXiv:2111.01264): a "
                  "200M-frame DQN run (50M agent steps, 12.5M updates at one per 4 steps) on one GTX 1080")

GTX1080_2016 = HardwareProfile(
    name="gtx1080-2016",
    description="one GTX 1080 (2016) and its host, from two published run times; DQN only",
    host_cores=1,
    update_device_ms={},  # not known apart from the gather
    update_host_ms={32: 2.6},
    pqn_update_device_ms={},
    forward_ms={},  # in host_store_ms: the paper gives acting as one figure per env step
    emulator_steps_per_s={},
    copy_bytes_per_s=0.0,  # not measured: the update's figure includes its copy
    host_call_ms=0.0,
    host_store_ms=1.15,
    host_gather_ns_per_byte=0.0,
    host_draw_ms=0.0,
    exchange=Exchange(negotiation_ms=1.0, intra_node_bytes_per_s=300e9, intra_node_latency_us=5.0,
                      inter_node_bytes_per_s=25e9, inter_node_latency_us=4.0),
    sources={
        "update_host_ms": GTX1080_SOURCE + " in 9 h with acting and learning concurrent, so at most 9 h / 12.5M = "
                          "2.6 ms per update, the replay's gather included; taken as the same at smaller batches",
        "host_store_ms": GTX1080_SOURCE + ": the sequential run took 25 h, (25 h - 12.5M x 2.6 ms) / 50M steps = "
                         "1.15 ms per env step of acting (emulator on one core and one GPU inference)",
        "negotiation_ms": H200_16CORE.sources["negotiation_ms"],
        "intra_node_bytes_per_s": "NVIDIA: an A100 has 12 third-generation NVLinks, 600 GB/s in all, i.e. 300 "
                                  "GB/s each way",
        "intra_node_latency_us": H200_16CORE.sources["intra_node_latency_us"],
        "inter_node_bytes_per_s": "NVIDIA DGX A100 reference architecture (DGX SuperPOD RA-09950-001, 2020): one "
                                  "200 Gb/s HDR InfiniBand port per GPU, 25 GB/s each",
        "inter_node_latency_us": H200_16CORE.sources["inter_node_latency_us"],
    },
)

BUILT_IN = {profile.name: profile for profile in (H200_16CORE, GTX1080_2016)}


def _number_table(data: dict, field: str, where: str) -> Dict[int, float]:
    table = data.get(field)
    if not isinstance(table, dict):
        raise ProfileError(f"{where}: {field!r} must be an object of size: value")
    parsed = {}
    for key, value in table.items():
        try:
            size, number = int(key), float(value)
        except (TypeError, ValueError):
            raise ProfileError(f"{where}: {field}[{key!r}] = {value!r} is not a size with a number") from None
        if size <= 0 or not number > 0 or math.isinf(number):
            raise ProfileError(f"{where}: {field}[{key!r}] = {value!r} must be a positive size and a positive "
                               "finite number")
        parsed[size] = number
    return parsed


def _number(data: dict, field: str, where: str, allow_zero: bool = True) -> float:
    value = data.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0 or (
            value == 0 and not allow_zero):
        raise ProfileError(f"{where}: {field!r} must be a {'non-negative' if allow_zero else 'positive'} number, "
                           f"not {value!r}")
    return float(value)


def profile_from_json(data, where: str) -> HardwareProfile:
    """A profile from its JSON form (`HardwareProfile.to_json`); ProfileError names the first bad field."""
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: not a hardware profile (a JSON object is expected)")
    if data.get("version") != PROFILE_VERSION:
        raise ProfileError(f"{where}: profile version {data.get('version')!r}; this hvd_dqn reads version "
                           f"{PROFILE_VERSION} (write it again with python -m hvd_dqn.plan.calibrate)")
    tables = {field: _number_table(data, field, where) for field in TABLES}
    if not tables["update_host_ms"] and not tables["pqn_update_device_ms"]:
        raise ProfileError(f"{where}: 'update_host_ms' (DQN) and 'pqn_update_device_ms' (PQN) are both empty; the "
                           "model needs one of them")
    scalars = {field: _number(data, field, where) for field in SCALARS}
    exchange = data.get("exchange")
    if not isinstance(exchange, dict):
        raise ProfileError(f"{where}: 'exchange' must be an object ({', '.join(Exchange.__annotations__)})")
    exchange = Exchange(**{field: _number(exchange, field, f"{where}: exchange", allow_zero=field.endswith("ms")
                                          or field.endswith("us"))
                           for field in Exchange.__annotations__})
    loops = []
    for index, loop in enumerate(data.get("loops") or []):
        try:
            loops.append(Loop(**loop))
        except TypeError as error:
            raise ProfileError(f"{where}: loops[{index}]: {error}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{where}: 'name' must be a non-empty string")
    update_timed = data.get("update_timed")
    if not isinstance(update_timed, dict) or not all(isinstance(update_timed.get(key), str) for key in (
            "agent", "network")) or not all(_setting_value(value) for value in update_timed.values()):
        raise ProfileError(f"{where}: 'update_timed' must be an object naming the agent whose update the profile "
                           "timed, its network and its settings, e.g. " + json.dumps(PLAIN_DQN_UPDATE))
    observation_shape = data.get("observation_shape")
    if not isinstance(observation_shape, list) or not observation_shape or not all(
            isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in observation_shape):
        raise ProfileError(f"{where}: 'observation_shape' must list the positive sizes of the observations the "
                           f"parts were timed on, e.g. {list(ATARI_OBSERVATIONS)}, not {observation_shape!r}")
    host_cores = data.get("host_cores")
    if not isinstance(host_cores, int) or isinstance(host_cores, bool) or host_cores <= 0:
        raise ProfileError(f"{where}: 'host_cores' must be a positive integer, not {host_cores!r}")
    return HardwareProfile(name=name, description=str(data.get("description", "")), host_cores=host_cores,
                           exchange=exchange, loops=tuple(loops), sources=dict(data.get("sources") or {}),
                           machine=dict(data.get("machine") or {}), update_timed=dict(update_timed),
                           observation_shape=tuple(observation_shape),
                           **tables, **scalars)


def _setting_value(value) -> bool:
    """A value `update_timed` may hold: a flag's number, word or widths (--hidden_sizes)."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(size, int) and not isinstance(size, bool) for size in value)
    return isinstance(value, (bool, int, float, str))


def load_profile(name_or_path: str) -> HardwareProfile:
    """A built-in profile by name, or a profile file (`calibrate --out`)."""
    if name_or_path in BUILT_IN:
        return BUILT_IN[name_or_path]
    where = f"--profile={name_or_path}"
    try:
        with open(name_or_path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ProfileError(f"{where}: no such file, and not a built-in profile ({', '.join(BUILT_IN)})") from None
    except (OSError, ValueError) as error:
        raise ProfileError(f"{where}: cannot read it as JSON ({error})") from None
    return profile_from_json(data, where)


def save_profile(profile: HardwareProfile, path: str) -> None:
    with open(path, "w") as handle:
        json.dump(profile.to_json(), handle, indent=1)
        handle.write("\n")


NETWORK_WORDS = {"nature_cnn": "the Nature CNN", "minatar_cnn": "MinAtar's CNN", "mlp": "an MLP"}


def describe_update(settings: dict) -> str:
    """An update in words from its settings (`update_timed`'s form): "QR-DQN (num_quantiles=200) on the Nature CNN
    (same padding)", "DQN on an MLP (128,128) with double DQN"."""
    from hvd_dqn.agent import registry

    try:
        title = registry.entry(settings["agent"]).title
    except registry.UnknownAgent:
        title = settings["agent"]
    extras = {"double_dqn": "double DQN", "dueling": "dueling heads", "noisy_nets": "noisy layers",
              "layer_norm": "LayerNorm"}
    network = ("network", "conv_padding", "hidden_sizes")
    used = [words for name, words in extras.items() if settings.get(name)]
    unused = [words for name, words in extras.items() if name in settings and not settings[name]]
    sizes = [f"{name}={value}" for name, value in settings.items()
             if name != "agent" and name not in extras and name not in network]
    text = title + (f" ({', '.join(sizes)})" if sizes else "")
    if "network" in settings:
        text += " on " + NETWORK_WORDS.get(settings["network"], str(settings["network"]))
        if "conv_padding" in settings:
            text += f" ({settings['conv_padding']} padding)"
        if "hidden_sizes" in settings:
            text += f" ({','.join(map(str, settings['hidden_sizes']))})"
    if used:
        return f"{text} with {listed(used, 'and')}"
    return f"{text} without {listed(unused, 'or')}" if unused else text


def describe_shape(shape) -> str:
    return "x".join(map(str, shape))


def describe(profile: HardwareProfile, fields: Optional[List[str]] = None) -> List[str]:
    """The profile's figures with their sources, as lines for a report."""
    lines = [f"profile {profile.name}: {profile.description}",
             f"  update_timed = {describe_update(profile.update_timed)}: the update its DQN tables timed",
             f"  observation_shape = {describe_shape(profile.observation_shape)}: the observations every part was "
             "timed on"]
    for field in fields or [*TABLES, *SCALARS]:
        value = getattr(profile, field)
        if isinstance(value, dict):
            if not value:
                continue
            value = ", ".join(f"{key}: {number:.4g}" for key, number in sorted(value.items()))
        elif isinstance(value, float):
            value = f"{value:.4g}"
        source = profile.sources.get(field, "")
        lines.append(f"  {field} = {value}" + (f"; {source}" if source else ""))
    for field in Exchange.__annotations__:
        source = profile.sources.get(field, "")
        lines.append(f"  exchange.{field} = {getattr(profile.exchange, field):.4g}" + (f"; {source}" if source else ""))
    return lines
