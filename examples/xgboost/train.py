"""Distributed XGBoost training over the env an XGBoostTrainingJob gives every replica.

The master (RANK 0) hosts the tracker on MASTER_PORT; every replica, the master included,
joins the collective through DMLC_TRACKER_URI / DMLC_TRACKER_PORT as DMLC_TASK_ID, trains on
its shard of a data set it generates (the same on every replica), and the trees are built
together. The master then checks the model's accuracy on held-out data and exits 0 only if
it is good; the workers exit 0 once training is done.

A replica's name resolves once its pod has an address and the cluster's DNS has seen it, a
moment after the containers start (docs/training-kinds.md, "Names resolve a moment after the
start"). XGBoost 1.x does not retry a name it cannot resolve: it connects to no address and
fails with "Failed to call `send`: Broken pipe". So the tracker's name is resolved here first,
waiting for it, and the collective is given the address.
"""
import os
import socket
import sys
import threading
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker


def resolve(host, timeout=120):
    """The address of host, waiting until the cluster's DNS serves it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.gethostbyname(host)
        except socket.gaierror:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])

if rank == 0:
    # Ranks by task id, so that the master is rank 0 of the collective too.
    tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=int(os.environ["MASTER_PORT"]), sortby="task")
    tracker.start(world)
    threading.Thread(target=tracker.join, daemon=True).start()

# A data set every replica makes alike: two classes split by a noisy linear rule.
rng = np.random.RandomState(7)
X = rng.normal(size=(6000, 8))
y = (X @ rng.normal(size=8) + 0.3 * rng.normal(size=6000) > 0).astype(int)
train_X, train_y, test_X, test_y = X[:5000], y[:5000], X[5000:], y[5000:]
shard = slice(rank, None, world)

env = {
    "DMLC_TRACKER_URI": resolve(os.environ["DMLC_TRACKER_URI"]),
    "DMLC_TRACKER_PORT": os.environ["DMLC_TRACKER_PORT"],
    "DMLC_TASK_ID": os.environ["DMLC_TASK_ID"],
}
with collective.CommunicatorContext(**env):
    print(f"rank {collective.get_rank()} of {collective.get_world_size()}: {len(train_y[shard])} rows", flush=True)
    dtrain = xgb.DMatrix(train_X[shard], label=train_y[shard])
    booster = xgb.train({"objective": "binary:logistic", "tree_method": "hist", "max_depth": 4, "eta": 0.3},
                        dtrain, num_boost_round=30)
    print(f"rank {collective.get_rank()}: trained {booster.num_boosted_rounds()} rounds", flush=True)

# Outside the collective (a DMatrix made inside it takes part in its allreduces).
if rank == 0:
    accuracy = float(((booster.predict(xgb.DMatrix(test_X)) > 0.5) == test_y).mean())
    print(f"rank 0: accuracy {accuracy:.3f} on {len(test_y)} held-out rows", flush=True)
    sys.exit(0 if accuracy > 0.9 else 1)
