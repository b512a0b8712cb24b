"""What a job keeps in its --logdir across runs: the choice of starting point (fresh or resumed), the restore,
and the collective checkpoint write. The file format itself is `hvd_dqn.logdir.checkpoint`'s.

What each rank saves of its own (its RNG states, its agent's `rank_state()` and, with --checkpoint_replay, its
agent's memory as a shard, which also holds its emulators where they can be saved) comes from its acting and its
agent; what is the job's (weights, optimizer, counters) from rank 0.
"""
from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from hvd_dqn import collectives
from hvd_dqn.agent.configs import config_from_json
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.logdir import checkpoint, storage
from hvd_dqn.logdir.checkpoint import CheckpointError
from hvd_dqn.agent.interface import Agent
from hvd_dqn.run.progress import Counters

# Settings that decide the shapes of what a checkpoint holds, and rank_scaling and counts_per_rank, which decide
# what each rank's envs, replay memory and update share are; a resumed run must agree on them, and on those its
# agent's registry entry names (`shapes_checkpoint`). A run begun while "updates" was the default (before version
# 0.1.3) is resumed with --rank_scaling=updates; one begun under "batch" before counts_per_rank existed, with
# --counts_per_rank (hvd_dqn.agent.configs.config_from_json reads it so).
_CHECKPOINT_SHAPING_SETTINGS = ("env_id", "hidden_sizes", "full_action_space", "mixed_precision", "network",
                                "conv_padding", "optimizer", "rank_scaling", "counts_per_rank", "agent")


# The local logdirs this process holds the lock of (`Checkpointing._lock_logdir`), by real path.
_LOGDIR_LOCKS: Dict[str, int] = {}


class Checkpointing:
    """One rank's part in the job's checkpoints. `store`: the object-store mirror of --logdir, or None;
    `logdir`: where files are written first (the mirror's local folder, or --logdir itself)."""

    def __init__(self, config: TrainConfig, store: Optional[storage.LogdirMirror], logdir: str):
        self.config = config
        self.store = store
        self.logdir = logdir

    # --- what a checkpoint holds ---------------------------------------------------------------------------------
    def contents(self, world_size: int) -> str:
        """What this job's checkpoints hold, and so what --resume continues, said after "checkpoint PATH"."""
        if self.config.checkpoint_replay:
            return ("holds the networks, the optimizer, the counters and every rank's memory (and its emulators "
                    "where they can be saved): --resume continues the run exactly")
        return ("holds the networks, the optimizer and the counters, not the ranks' memories (--checkpoint_replay "
                "keeps them): --resume " + self._without_memories(world_size, "refills", "starts"))

    def _without_memories(self, world_size: int, refill: str = "refilling", start: str = "starting") -> str:
        """What a resume without the ranks' memories does instead, with the verbs `refill` and `start`."""
        from hvd_dqn.rank_split import learns_from_replay
        from hvd_dqn.rank_split import rank_learning_starts

        if not learns_from_replay(self.config):
            return f"{start} a new rollout on every rank"
        return (f"{refill} each rank's replay memory with {rank_learning_starts(self.config, world_size):,} "
                "transitions before updating again (a run that does not repeat the unstopped one exactly)")

    # --- starting -----------------------------------------------------------------------------------------
    def check_shared_logdir(self, world) -> None:
        """Collective: with --checkpoint_replay every rank writes into --logdir, so all must see the same
        folder. Rank 0 leaves a file there; a rank that cannot see it (a host-local folder) is named."""
        if not self.config.checkpoint_replay or world.size == 1:
            return
        name = f".shared-probe-{os.getpid()}"
        probe = os.path.join(self.config.logdir, name)
        if world.is_chief:
            if self.store:
                self.store.leave_probe(name)
            else:
                with open(probe, "w") as handle:
                    handle.write("rank 0 was here")
        name, probe = collectives.broadcast_object((name, probe), "shared_probe")
        if self.store:
            seen = self.store.sees_and_writes(name, world.rank)
        else:
            seen = os.path.exists(probe) and os.access(self.config.logdir, os.W_OK)
        views = collectives.gather_objects((seen, os.environ.get("HOROVOD_HOSTNAME") or os.uname().nodename),
                                           "shared_probe_seen")
        if world.is_chief:
            self.store.remove(name) if self.store else os.remove(probe)
        blind = [f"rank {rank} on {host}" for rank, (seen, host) in enumerate(views) if not seen]
        if blind:
            where = ("one store every rank can read and write (check their credentials and endpoint)" if self.store
                     else "one shared, writable folder for every rank")
            raise ConfigError(f"--checkpoint_replay: --logdir={self.config.logdir} is not {where} "
                              f"({', '.join(blind)} cannot see rank 0's files); put it on "
                              "a shared file system or leave out --checkpoint_replay")

    def restore_or_broadcast(self, world, agent: Agent, acting_rng: np.random.Generator
                             ) -> Tuple[Optional[Counters], Optional[Dict[str, np.ndarray]]]:
        """Collective. With --resume (or --auto_resume and a checkpoint to resume), rank 0 loads the newest
        checkpoint that reads back whole (skipping, with a warning naming each, any that are corrupt); then
        everything it holds is broadcast, and every rank takes back its own state. A fresh run into a logdir
        that holds checkpoints is refused. Returns the resumed counters (None for a fresh run) and this
        rank's acting state saved with its replay shard (emulators and running episodes), if any."""
        resume_from, counters, problem = None, None, None
        if world.is_chief:
            problem = self._lock_logdir()
            if problem is None:
                resume_from, counters, problem = self._choose_starting_point(agent)
        problem = collectives.broadcast_object(problem, "resume_problem")
        resume_from = collectives.broadcast_object(resume_from, "resume_path")
        if problem:
            raise ConfigError(problem)
        counters = collectives.broadcast_object(counters, "resume_counters")
        # Horovod: every rank starts from rank 0's weights, target weights and optimizer state.
        collectives.broadcast_from_chief(agent.synchronized_variables)
        if counters is None:
            return None, None
        resumed = Counters.from_saved(counters)
        acting_state = self._restore_rank_state(world, resume_from, counters, resumed, agent, acting_rng)
        return resumed, acting_state

    def complete_checkpoints(self) -> List[str]:
        """The run's complete checkpoints, oldest first: folders, or URLs in an object store."""
        return self.store.complete_checkpoints() if self.store else checkpoint.complete_checkpoints(self.config.logdir)

    def _lock_logdir(self):
        """Rank 0 holds an exclusive lock on a local logdir for the life of its process, so a second job
        started into the same folder (a resubmitted batch job, a study run twice) stops with one line instead
        of appending to this job's logs and pruning its checkpoints. The lock is the kernel's (flock on the
        folder itself, no file added) and goes with the process, so a killed job leaves nothing behind. Not
        under --elastic, where rank 0 may move to another process, nor for object stores, whose working
        copy is a folder of this process's own. Returns the problem, or None."""
        if self.store or self.config.elastic:
            return None
        held = os.path.realpath(self.logdir)
        if held in _LOGDIR_LOCKS:  # this process's own earlier run (hvd_dqn.runner: a train, then a resume)
            return None
        descriptor = os.open(self.logdir, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return (f"--logdir={self.config.logdir}: another training job is writing there; wait for it to "
                    "finish, or choose another --logdir")
        except OSError:  # a file system without flock (some network mounts): train unguarded, as before
            os.close(descriptor)
            return None
        _LOGDIR_LOCKS[held] = descriptor  # held until the process exits
        return None

    def _choose_starting_point(self, agent: Agent):
        """Rank 0: (checkpoint to resume or None, its counters, problem or None)."""
        existing = self.complete_checkpoints()
        if self.config.resume or (self.config.auto_resume and existing):
            resume_from, counters, problem = self._load_newest_readable_checkpoint(agent)
            if problem:
                problem = f"{'--resume' if self.config.resume else '--auto_resume'}: {problem}"
            return resume_from, counters, problem
        if existing:
            # A fresh run would write its checkpoints among the earlier run's and prune them: refuse.
            return None, None, (f"--logdir={self.config.logdir} already holds checkpoints of a run (newest "
                                f"{os.path.basename(existing[-1])}); add --resume to continue it, or choose another "
                                "--logdir")
        return None, None, None

    def _load_newest_readable_checkpoint(self, agent: Agent):
        """Rank 0: (path, counters, None) for the newest complete checkpoint that loads, or (None, None, why).
        A stored checkpoint's path is its URL; it is read from a local copy."""
        candidates = self.complete_checkpoints()[::-1]
        if not candidates:
            return None, None, f"no complete checkpoint under {checkpoint.checkpoint_root(self.config.logdir)}"
        for path in candidates:
            try:
                local = self.store.fetch_checkpoint(path) if self.store else path
                saved = config_from_json(checkpoint.read_config_json(local))
            except (OSError, ValueError, TypeError, storage.StorageError) as error:
                logging.warning("skipping checkpoint %s: its config.json is unreadable (%s)", path, error)
                continue
            problem = incompatibility(self.config, saved)
            if problem:
                return None, None, f"{path} {problem}"
            try:
                return path, checkpoint.restore(local, agent.checkpoint_items()), None
            except Exception as error:  # TensorFlow reports damaged files with several error types
                logging.warning("skipping checkpoint %s: it does not load (%s)", path, checkpoint.first_line(error))
        return None, None, (f"none of the {len(candidates)} complete checkpoints under "
                            f"{checkpoint.checkpoint_root(self.config.logdir)} loads (see the warnings above)")

    def _restore_rank_state(self, world, path: str, counters: dict, resumed: Counters, agent: Agent,
                            acting_rng: np.random.Generator) -> Optional[Dict[str, np.ndarray]]:
        """Collective: each rank takes back its RNG states, its agent's rank state and (with --checkpoint_replay)
        its replay shard, with the acting state saved in it (returned; None if there is none). Re-sharding
        rule when the rank count changed: rank r takes what rank r saved, if it saved anything; other ranks
        start from fresh RNGs and empty memories."""
        rank_states = counters.get("rank_states") or []
        saved = rank_states[world.rank] if world.rank < len(rank_states) else None
        if saved is not None:
            acting_rng.bit_generator.state = saved["rng"]
            if "sample_rng" in saved:  # checkpoints before the sampling stream had its own generator lack it
                agent.sample_rng.bit_generator.state = saved["sample_rng"]
        problem, restored, acting_state = None, None, None
        shard = checkpoint.replay_shard_path(path, world.rank)
        if self.config.checkpoint_replay and self.store:  # every rank copies its own shard, if stored
            try:
                local_shard = os.path.join(self.logdir, "checkpoints", ".resumed", os.path.basename(shard))
                shard = local_shard if self.store.fetch_shard(shard, local_shard) else shard
            except storage.StorageError as error:
                problem = str(error)
        replay = agent.memory
        if self.config.checkpoint_replay and os.path.exists(shard) and problem is None:
            try:
                acting_state = replay.load(shard) or None
                restored = replay.digest()  # as saved, so it can be compared with the saved digest
                if acting_state is None:
                    # The envs restart with new episodes (the trainer resets them): end the stored ones here.
                    replay.cut_episodes()
                agent.load_rank_state(saved)
            except (OSError, ValueError, KeyError) as error:
                problem = f"replay shard {shard} {error}"
        outcomes = collectives.gather_objects((problem, restored, len(replay), acting_state is not None),
                                              "replay_restored")
        problem = next((outcome[0] for outcome in outcomes if outcome[0]), None)
        if problem:
            raise ConfigError(f"--resume: {problem}; resume without --checkpoint_replay or with the settings "
                              "that wrote it")
        if not world.is_chief:
            return acting_state
        if len(rank_states) != world.size:
            logging.warning("the checkpoint was written by %d ranks, this run has %d: ranks without saved state "
                            "start with fresh RNGs and empty replay memories", len(rank_states), world.size)
        digests = [outcome[1] for outcome in outcomes]
        expected = [state.get("replay_digest") for state in rank_states][:world.size]
        if self.config.checkpoint_replay and any(digests):
            logging.info("replay memories restored (transitions per rank %s; digests %s)",
                         [outcome[2] for outcome in outcomes], digests)
            if digests[:len(expected)] != expected:
                logging.error("restored replay digests %s differ from those saved %s", digests, expected)
        logging.info("resumed from %s at %s env steps, %s updates%s", path, f"{resumed.env_steps:,}",
                     f"{resumed.updates:,}", "" if any(digests) else "; " + self._without_memories(world.size))
        if any(digests):
            with_emulators = sum(outcome[3] for outcome in outcomes)
            logging.info("emulator states saved with %d of %d ranks' memories: %s", with_emulators, world.size,
                         "their episodes under way go on" if with_emulators == world.size else
                         "ranks without them start new episodes (Atari's emulators cannot be saved)")
        return acting_state

    # --- writing ------------------------------------------------------------------------------------------
    def write(self, world, counters: Counters, agent: Agent, acting_rng: np.random.Generator,
              acting_state: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Collective: every rank reports its state (and, with --checkpoint_replay, writes its replay shard
        into the staging folder, with `acting_state`: its emulators and running episodes, so that a resumed
        run goes on with the episodes under way); rank 0 writes the rest and completes the checkpoint. A write
        that fails on any rank (a full disk) stops the job on every rank with one line naming it; the earlier
        checkpoints stay intact.

        The checkpoint records each replica's weight digest: the proof, for any run, that data parallelism
        kept the replicas identical. A mismatch is logged as an error; the checkpoint holds rank 0's.
        """
        config, env_steps = self.config, counters.env_steps
        shard_error = (self._write_replay_shard(world, env_steps, agent.memory, acting_state)
                       if config.checkpoint_replay else None)
        rank_state = dict(weights_digest=collectives.weights_digest(agent.online.variables),
                          rng=acting_rng.bit_generator.state, sample_rng=agent.sample_rng.bit_generator.state,
                          **agent.rank_state(),
                          replay_digest=agent.memory.digest() if config.checkpoint_replay else None,
                          error=shard_error)
        rank_states = collectives.gather_objects(rank_state, "rank_states")
        problem = next((state["error"] for state in rank_states if state["error"]), None)
        path = None
        if world.is_chief and problem is None:
            digests = [state["weights_digest"] for state in rank_states]
            if len(set(digests)) != 1:
                logging.error("replicas differ at %s env steps (online-weight digests by rank: %s); the "
                              "gradient allreduce is not in effect", f"{env_steps:,}", digests)
            saved_counters = dict(dataclasses.asdict(counters), world_size=world.size,
                                  replica_weight_digests=digests, time=time.time(),
                                  rank_states=[{key: value for key, value in state.items()
                                                if key not in ("weights_digest", "error")}
                                               for state in rank_states])
            try:
                # A mirror keeps only the newest checkpoint locally; the store keeps --keep_checkpoints.
                path = checkpoint.save(self.logdir, agent.checkpoint_items(), saved_counters,
                                       config.to_json(), 1 if self.store else config.keep_checkpoints)
                if self.store:
                    path = self.store.upload_checkpoint(path, config.keep_checkpoints)
            except (OSError, tf.errors.OpError) as error:
                problem = f"rank 0 could not write it ({getattr(error, 'strerror', None) or error})"
            except storage.StorageError as error:
                problem = f"rank 0 could not store it ({error})"
        elif world.is_chief:
            shutil.rmtree(checkpoint.staging_path(self.logdir, env_steps), ignore_errors=True)
        problem = collectives.broadcast_object(problem, "checkpoint_problem")
        if problem:
            root = checkpoint.checkpoint_root(config.logdir)
            raise CheckpointError(f"checkpoint at {env_steps:,} env steps in {root} failed: {problem}; the earlier "
                                  "checkpoints are intact")
        if path:
            logging.info("checkpoint written: %s", path)

    def _write_replay_shard(self, world, env_steps: int, replay, acting_state) -> Optional[str]:
        """Collective: this rank's replay shard into the checkpoint's staging folder; returns the problem."""
        shard_error = None
        staging = checkpoint.staging_path(self.logdir, env_steps)
        if world.is_chief:
            checkpoint.create_staging(self.logdir, env_steps)
            if self.store:
                shard_error = self._unmark_stored(env_steps)
        collectives.barrier("staging_created")
        try:
            if self.store and not world.is_chief:  # a mirror of its own: no folder is shared
                checkpoint.create_staging(self.logdir, env_steps)
            shard = checkpoint.replay_shard_path(staging, world.rank)
            replay.save(shard, extra=acting_state)
            if self.store and not world.is_chief:
                self.store.upload_shard(shard, checkpoint.checkpoint_name(env_steps))
                shutil.rmtree(staging, ignore_errors=True)
        except OSError as error:
            shard_error = f"rank {world.rank} could not write its replay shard ({error.strerror or error})"
        except storage.StorageError as error:
            shard_error = f"rank {world.rank} could not store its replay shard ({error})"
        return shard_error

    def _unmark_stored(self, env_steps: int) -> Optional[str]:
        """Rank 0, object store: unmarks a stored checkpoint of the same env steps before the ranks upload
        shards into it; returns the problem, if any."""
        try:
            self.store.unmark(checkpoint.checkpoint_name(env_steps))
        except storage.StorageError as error:
            return f"rank 0 could not prepare it ({error})"
        return None


def incompatibility(config: TrainConfig, saved: TrainConfig):
    """Why `saved`'s checkpoint cannot be resumed by `config`, or None if it can."""
    from hvd_dqn.agent import registry

    # An agent's own shaping settings count only where the saved run's agent read them too: a C51 run resumed as
    # QR-DQN differs in --agent, not in a --num_quantiles it never had.
    try:
        saved_shaping = set(registry.entry(saved.agent).shapes_checkpoint)
    except registry.UnknownAgent:
        saved_shaping = set()  # an agent of a package not installed now: --agent alone differs
    shaping = _CHECKPOINT_SHAPING_SETTINGS + tuple(name for name in registry.entry(config.agent).shapes_checkpoint
                                                   if name in saved_shaping)
    # by name in both runs' settings: a shaping setting of the agent's own (--rank_scaling of the DQN family) is
    # absent from another agent's
    saved_values, values = saved.setting_values(), config.setting_values()
    differences = [f"--{name}={saved_values.get(name)!r} (this run: {values.get(name)!r})"
                   for name in shaping if saved_values.get(name) != values.get(name)]
    if differences:
        return "was written with " + ", ".join(differences) + "; use another --logdir or the same settings"
    return None
