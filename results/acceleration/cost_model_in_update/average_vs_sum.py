"""Under horovodrun -np 2: Breakout's gradient shapes allreduced with op=Average against op=Sum, in turns."""
import time, sys
import numpy as np
from hvd_dqn.run import distributed
distributed.init_horovod(intra_op_threads=1, inter_op_threads=1, cores_per_rank=1)
import horovod.tensorflow as hvd
import tensorflow as tf
from hvd_dqn.flags import config_from_flags, define_flags
from absl import flags
define_flags()
flags.FLAGS(sys.argv)
config = config_from_flags(check_logdir_writable=False)
from hvd_dqn.agent.networks import q_network_for
from hvd_dqn.envs import make_env_for, spec_of
import dataclasses
env = make_env_for(dataclasses.replace(config, env_threads=1), 1); spec = spec_of(env); env.close()
net = q_network_for(config, spec, "online")
grads = [tf.random.normal(v.shape, seed=hvd.rank()) for v in net.trainable_variables]
print("bytes", sum(int(np.prod(g.shape))*4 for g in grads), "tensors", len(grads))
def make(op):
    @tf.function
    def f(*tensors):
        return hvd.grouped_allreduce(list(tensors), op=op)
    return lambda: f(*grads)
fns = {"average": make(hvd.Average), "sum": make(hvd.Sum)}
for f in fns.values(): f()[-1].numpy()
res = {k: [] for k in fns}
for r in range(6):
    for k, f in fns.items():
        hvd.broadcast_object(0, root_rank=0, name=f"b{k}")
        t = time.perf_counter()
        for _ in range(40):
            f()[-1].numpy()
        res[k].append((time.perf_counter() - t) / 40 * 1000)
if hvd.rank() == 0:
    for k, v in res.items():
        print(k, "ms per allreduce: median %.3f" % np.median(v), ["%.2f" % x for x in v])
