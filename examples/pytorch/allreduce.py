"""All-reduce over gloo: each process adds rank + 1, and checks the sum, STEPS times.

It joins the process group from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://): the
GenericJob example gives them from its variables ($(rank), $(replicas[worker]),
$(service.worker[0].host), $(service.port[torch])); torchrun gives them too. Each step is
reported to the job's status with examples/progress's helper, when it is beside this script
(docs/progress.md). It exits 0 only if every reduced value is right.

STALL_AFTER_STEP=N (and, optionally, STALL_MARKER=<file>) makes this rank hang after step N,
reporting nothing more, as a dead collective would: a way to watch spec.progressDeadlineSeconds
catch a stalled job (docs/failures.md, "Stalls"). With STALL_MARKER, it hangs only when the
file does not exist yet, and makes it: on a node's hostPath, a restarted job runs through.
"""
import datetime
import os
import signal
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
stall_after = int(os.environ.get("STALL_AFTER_STEP", "0"))
marker = os.environ.get("STALL_MARKER")
if stall_after and marker:
    if os.path.exists(marker):
        stall_after = 0
    else:
        open(marker, "w").close()
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
    if step == stall_after:
        print(f"rank {rank} of {world}: stalling after step {step}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        while True:
            time.sleep(3600)
    time.sleep(pause)
print(f"rank {rank} of {world}: all-reduce sum {value.item():g}, want {want:g}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
