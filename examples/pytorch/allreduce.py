"""All-reduce over gloo: each process adds rank + 1, and checks the sum, STEPS times.

It joins the process group from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://): the
GenericJob example gives them from its variables ($(rank), $(replicas[worker]),
$(service.worker[0].host), $(service.port[torch])); torchrun gives them too. Each step is
reported to the job's status with examples/progress's helper, when it is beside this script
(docs/progress.md). It exits 0 only if every reduced value is right.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

try:
    from t9k_progress import report
except ImportError:  # run without the helper: no progress reported
    def report(**_):
        return False

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
steps = int(os.environ.get("STEPS", "10"))
pause = float(os.environ.get("STEP_SECONDS", "0.5"))
print(f"rank {rank} of {world}: joining {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
want = world * (world + 1) / 2
ok = True
started = time.monotonic()
for step in range(1, steps + 1):
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    ok = ok and value.item() == want
    eta = (time.monotonic() - started) / step * (steps - step)
    report(step=step, total_steps=steps, eta_seconds=eta, sum=f"{value.item():g}")
    time.sleep(pause)
print(f"rank {rank} of {world}: all-reduce sum {value.item():g}, want {want:g}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
