"""Elastic data-parallel training under torchrun: a world that grows and shrinks.

torchrun (python3 -m torch.distributed.run) starts this script on every replica of the
elastic type. The job gives torchrun its rendezvous in the PET_* variables (docs/elastic.md):
the bounds (PET_NNODES=MIN:MAX), the c10d backend on rank 0's host and the job's UID as the
run's id, so the command needs none of them. When a replica joins (the job grows) or leaves
(it shrinks, or a node is lost), torchrun stops this script on every survivor and starts it
again in a new world; the script then goes on from its last checkpoint.

Each step all-reduces rank + 1 over gloo and checks the sum; rank 0 writes the step reached
to CHECKPOINT every CHECKPOINT_EVERY steps. The script exits 0 once STEPS steps are done, or
earlier, all ranks together, once rank 0 sees the file STOP_FILE (when set): a way to end a
run that is watched rather than timed.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

steps = int(os.environ.get("STEPS", "40"))
pause = float(os.environ.get("STEP_SECONDS", "1"))
checkpoint = os.environ.get("CHECKPOINT", "/checkpoint/step")
every = int(os.environ.get("CHECKPOINT_EVERY", "2"))
stop_file = os.environ.get("STOP_FILE")

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
step = 0
if os.path.exists(checkpoint):
    with open(checkpoint) as f:
        step = int(f.read().strip() or 0)
print(f"rank {rank} of {world}: life {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}, "
      f"from step {step}", flush=True)
want = world * (world + 1) / 2
while step < steps:
    # The sum of rank + 1 over the world, and whether rank 0 was told to stop.
    stop = 1.0 if rank == 0 and stop_file and os.path.exists(stop_file) else 0.0
    reduced = torch.tensor([float(rank + 1), stop])
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    value = reduced[0]
    if reduced[1].item() > 0:
        print(f"rank {rank} of {world}: told to stop at step {step}", flush=True)
        break
    if value.item() != want:
        print(f"rank {rank} of {world}: all-reduce sum {value.item():g}, want {want:g}", flush=True)
        sys.exit(1)
    step += 1
    if rank == 0 and step % every == 0:
        with open(checkpoint + ".new", "w") as f:
            f.write(str(step))
        os.replace(checkpoint + ".new", checkpoint)
    print(f"rank {rank} of {world}: step {step}, all-reduce sum {value.item():g}", flush=True)
    time.sleep(pause)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} of {world}: done at step {step}", flush=True)
