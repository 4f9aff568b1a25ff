"""All-reduce over gloo: each replica of a GenericJob adds rank + 1, and checks the sum.

The job gives it RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from its variables
($(rank), $(replicas[worker]), $(service.worker[0].host), $(service.port[torch])). It exits
0 only if the reduced value is right.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
master = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
print(f"rank {rank} of {world}: joining {master}", flush=True)
dist.init_process_group("gloo", init_method=master, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value, op=dist.ReduceOp.SUM)
want = world * (world + 1) / 2
print(f"rank {rank} of {world}: all-reduce sum {value.item():g}, want {want:g}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if value.item() == want else 1)
