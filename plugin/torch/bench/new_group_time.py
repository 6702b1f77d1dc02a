"""What torch's new_group costs with the gcx backend: a sub-group made by
its members from the default group's communicator (gcx_comm_create_group)
against one made over its own c10d Store (gcx_comm_create with an OOB over
Store keys, the way before), alternating in one run.

    PYTHONPATH=build/plugin/torch python plugin/torch/bench/new_group_time.py [-n RANKS] [-i ITERS]

Each iteration splits the ranks into two halves of the same parity (4
ranks: {0,2} and {1,3}) with two new_group calls (each rank is a member of
one), times them on every rank from a barrier of the default group, and
destroys the group. Prints rank 0's median and fastest time per way. The
default group uses a TCPStore, as torchrun does. Cost: 2 x ITERS group
creations; seconds.
"""
import argparse
import datetime
import os
import socket
import statistics
import subprocess
import sys
import time


def worker(rank, size, port, iters):
    import torch.distributed as dist
    import torch_gcx

    dist.init_process_group("gcx", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    halves = [list(range(0, size, 2)), list(range(1, size, 2))]
    times = {True: [], False: []}
    for i in range(2 * iters):
        from_default = i % 2 == 0
        torch_gcx.subgroups_from_default = from_default
        dist.barrier()
        t0 = time.perf_counter()
        mine = None
        for ranks in halves:
            g = dist.new_group(ranks, backend="gcx")
            if rank in ranks:
                mine = g
        times[from_default].append(time.perf_counter() - t0)
        want = "create_group" if from_default else "store"
        assert torch_gcx.group_creation(mine) == want
        dist.destroy_process_group(mine)
    dist.barrier()
    if rank == 0:
        print(f"# {size} ranks, {iters} new_group pairs per way, alternating")
        print(f"# {'way':<14} {'median_ms':>10} {'min_ms':>10}")
        for way, key in [("create_group", True), ("store", False)]:
            t = times[key]
            print(f"  {way:<14} {1e3 * statistics.median(t):10.3f} "
                  f"{1e3 * min(t):10.3f}")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=4, help="ranks")
    ap.add_argument("-i", type=int, default=100, help="iterations per way")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        worker(a.rank, a.n, a.port, a.i)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "-n", str(a.n),
                               "-i", str(a.i), "--rank", str(r),
                               "--port", str(port)], env=env)
             for r in range(a.n)]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
