import os, sys, time
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
os.sched_setaffinity(0, [rank])
import numpy as np

def busy(n):
    x = 0
    for i in range(n):
        x += i
    return x

# Calibrate the fixed amount of work before Horovod starts its thread: iterations for 1.36 ms.
for _ in range(3): busy(200000)
t = time.perf_counter(); busy(2_000_000); rate = 2_000_000 / (time.perf_counter() - t)
iters = int(rate * 1.36e-3); busy_alone = iters / rate
import horovod.tensorflow as hvd, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1); tf.config.threading.set_inter_op_parallelism_threads(1)
hvd.init()
os.sched_setaffinity(0, [rank])
for tid in os.listdir("/proc/self/task"):
    try: os.sched_setaffinity(int(tid), [rank])
    except Exception: pass
shapes = [(3,3,4,16),(16,),(1600,128),(128,),(128,6),(6,)]
grads = [tf.random.normal(s) for s in shapes]
@tf.function
def allreduce():
    return [hvd.allreduce(g, op=hvd.Average, name=f"g{i}") for i, g in enumerate(grads)]
allreduce()[-1].numpy()
def run(mode, calls=3000):
    start = time.perf_counter()
    for _ in range(calls):
        if mode == "amount":
            busy(iters)
        else:
            until = time.perf_counter() + busy_alone
            while time.perf_counter() < until: pass
        allreduce()[-1].numpy()
    return ((time.perf_counter() - start) / calls - busy_alone) * 1000
res = {m: [] for m in ("time", "amount")}
for _ in range(3):
    for m in res: res[m].append(run(m))
# the busy work alone again, with Horovod's thread running beside it
t = time.perf_counter(); busy(iters * 1000); after = (time.perf_counter() - t) / 1000
print(f"rank {rank}/{hvd.size()}: busy {busy_alone*1000:.3f} ms calibrated before init, {after*1000:.3f} ms after init (no allreduce); t_sync time-based {np.median(res['time']):.3f} ms, amount-based {np.median(res['amount']):.3f} ms; rounds {res}", flush=True)
