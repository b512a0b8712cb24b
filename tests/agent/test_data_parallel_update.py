"""Multi-process tests under `horovodrun -np 2`: the replicas really are trained together."""
import re

import numpy as np
import pytest

from conftest import MP_SCRIPTS, PYTHON, horovodrun

SCRIPT = MP_SCRIPTS / "gradient_sync.py"


def _load(out, rank):
    return np.load(out / f"rank{rank}.npz")


@pytest.mark.parametrize("controller, flags", [("gloo", []), ("mpi", []), ("gloo", ["--mixed_precision"])],
                         ids=["gloo", "mpi", "gloo-mixed-precision"])
def test_ranks_hold_identical_weights_after_updates_on_different_data(tmp_path, controller, flags):
    """Also with --mixed_precision, whose loss-scaled update averages through DistributedGradientTape."""
    horovodrun(2, [PYTHON, SCRIPT, "--mode=learner", "--updates=20", f"--out={tmp_path}", *flags],
               controller=controller, timeout=300)
    rank0, rank1 = _load(tmp_path, 0), _load(tmp_path, 1)
    assert int(rank0["size"]) == 2
    # The premise: each rank trained on its own data, and training moved the weights.
    assert not np.array_equal(rank0["data_seen"], rank1["data_seen"])
    assert not np.array_equal(rank0["initial"], rank0["final"])
    # The claim: the replicas are bitwise identical.
    np.testing.assert_array_equal(rank0["initial"], rank1["initial"])
    np.testing.assert_array_equal(rank0["final"], rank1["final"])


def test_apply_gradients_path_diverges_which_is_why_the_learner_uses_minimize(tmp_path):
    """Negative control for the test above: the same check catches the known Horovod trap."""
    horovodrun(2, [PYTHON, SCRIPT, "--mode=trap", "--updates=20", f"--out={tmp_path}"], timeout=300)
    rank0, rank1 = _load(tmp_path, 0), _load(tmp_path, 1)
    np.testing.assert_array_equal(rank0["initial"], rank1["initial"])
    assert np.max(np.abs(rank0["final"] - rank1["final"])) > 1e-4


def test_two_ranks_of_batch_b_equal_one_rank_of_batch_2b(tmp_path):
    batch = 16
    horovodrun(2, [PYTHON, SCRIPT, "--mode=sgd_one", f"--batch={batch}", f"--out={tmp_path / 'np2'}"], timeout=300)
    horovodrun(1, [PYTHON, SCRIPT, "--mode=sgd_one", f"--batch={batch}", f"--out={tmp_path / 'np1'}"], timeout=300)
    two_ranks, one_rank = _load(tmp_path / "np2", 0), _load(tmp_path / "np1", 0)
    assert len(two_ranks["data_seen"]) == batch and len(one_rank["data_seen"]) == 2 * batch
    np.testing.assert_array_equal(two_ranks["initial"], one_rank["initial"])
    step = np.max(np.abs(one_rank["final"] - one_rank["initial"]))
    assert step > 1e-3, "the update must move the weights for the comparison to mean anything"
    np.testing.assert_allclose(two_ranks["final"], one_rank["final"], rtol=0, atol=1e-5)


def test_fp16_allreduce_compresses_the_gradients_and_still_averages_them(tmp_path):
    batch = 16
    for name, flags in (("fp16", ["--fp16_allreduce"]), ("fp32", [])):
        horovodrun(2, [PYTHON, SCRIPT, "--mode=sgd_one", f"--batch={batch}", f"--out={tmp_path / name}", *flags],
                   timeout=300)
    horovodrun(1, [PYTHON, SCRIPT, "--mode=sgd_one", f"--batch={batch}", f"--out={tmp_path / 'np1'}"], timeout=300)
    fp16, fp32, one_rank = _load(tmp_path / "fp16", 0), _load(tmp_path / "fp32", 0), _load(tmp_path / "np1", 0)
    np.testing.assert_array_equal(fp16["final"], _load(tmp_path / "fp16", 1)["final"])  # replicas stay equal
    step = one_rank["final"] - one_rank["initial"]
    # float16 keeps about 3 significant digits of each gradient: the step is the averaged one within that...
    np.testing.assert_allclose(fp16["final"] - fp16["initial"], step, rtol=2e-3, atol=1e-6)
    # ... and is not the float32 step bit for bit, so the compression was in effect.
    assert not np.array_equal(fp16["final"], fp32["final"])


def test_horovods_timeline_passes_through_and_records_the_gradient_allreduce(tmp_path):
    timeline = tmp_path / "timeline.json"
    horovodrun(2, ["--timeline-filename", timeline, PYTHON, SCRIPT, "--mode=learner", "--updates=3",
                   f"--out={tmp_path}"], timeout=300)
    text = timeline.read_text()
    # One allreduce per gradient tensor of the 4 -> 32 -> 32 -> 3 MLP (3 kernels, 3 biases), under Horovod's
    # names for DistributedOptimizer's gradients.
    assert "ALLREDUCE" in text
    assert len(set(re.findall(r'"name": "([^"]*DistributedAdam_Allreduce[^"]*)"', text))) == 6, text[:2000]


def test_four_ranks_repeat_a_run_bit_for_bit_with_the_same_seed(tmp_path):
    """With 3 or more ranks the order in which an allreduce adds the ranks' gradients decides the last bit
    of the sum; left to Horovod's tensor fusion that order moves with timing, and two 4-rank CartPole runs of
    one seed parted ways within 500 env steps of the first update. The learner's gradients travel as one
    allreduce group, so a seed names one run: the same episodes and the same final weights on every rank."""
    from hvd_dqn.logdir import checkpoint

    from conftest import REPO, episodes_without_wall_time

    def train(name):
        logdir = tmp_path / name
        horovodrun(4, [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                       f"--logdir={logdir}", "--seed=3", "--total_env_steps=3200", "--eval_interval_env_steps=0",
                       "--stop_at_train_return=inf"], timeout=600)
        counters = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
        digests = counters["replica_weight_digests"]  # one per rank
        return episodes_without_wall_time(logdir / "episodes.csv"), digests, counters["updates"]

    episodes, digests, updates = train("one")
    episodes_again, digests_again, _ = train("again")
    # Learning ran: from 1,000 env steps on (each rank's 250), each rank one update per 2 of its own env steps,
    # one per 8 of the job's: 275 allreduced sums that could differ.
    assert updates >= 250
    assert episodes.count("\n") > 50 and episodes == episodes_again
    assert len(set(digests)) == 1 and digests == digests_again
