"""All-reduce over gloo: each process adds rank + 1, and checks the sum.

It joins the process group from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://): the
GenericJob example gives them from its variables ($(rank), $(replicas[worker]),
$(service.worker[0].host), $(service.port[torch])); torchrun gives them too. It exits 0
only if the reduced value is right.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
print(f"rank {rank} of {world}: joining {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value, op=dist.ReduceOp.SUM)
want = world * (world + 1) / 2
print(f"rank {rank} of {world}: all-reduce sum {value.item():g}, want {want:g}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if value.item() == want else 1)
