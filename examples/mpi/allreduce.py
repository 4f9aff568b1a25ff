"""An MPI all-reduce: every rank adds rank + 1; rank 0 checks the sum and prints it.

It exits non-zero on every rank if the sum is wrong, and, for the tests of failure, rank
FAIL_RANK (when set) exits with code 3 after the reduction.
"""
import os
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
want = size * (size + 1) // 2
print(f"rank {rank} of {size} on {MPI.Get_processor_name()}: all-reduce sum {total}, want {want}", flush=True)
comm.Barrier()
if os.environ.get("FAIL_RANK") == str(rank):
    sys.exit(3)
sys.exit(0 if total == want else 1)
