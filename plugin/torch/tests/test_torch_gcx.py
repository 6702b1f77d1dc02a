"""pytest suite of the gcx torch backend: each test starts 1-4 ranks of
worker.py (fresh processes, FileStore or TCPStore), compares gcx's results
with gloo's in the same processes, and kills all ranks if one hangs.

Cost: ~25 launches of 1-4 processes (each imports torch: ~1-2 s of CPU),
a few minutes in all on 2 cores."""
import socket
import subprocess
import sys

import pytest

from launch import check_ok, launch


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_allreduce(size):
    check_ok("allreduce", size)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_data_movement(size):
    # broadcast, allgather (list and tensor), gather, scatter, barrier
    check_ok("movement", size)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_reduce_scatter_and_reduce(size):
    check_ok("reduce", size)


@pytest.mark.parametrize("size", [1, 2, 4])
def test_alltoall(size):
    check_ok("alltoall", size)


@pytest.mark.parametrize("size", [2, 3])
def test_send_recv(size):
    check_ok("p2p", size)


@pytest.mark.parametrize("size", [3, 4])
def test_subgroups(size):
    check_ok("subgroups", size)


@pytest.mark.parametrize("size", [2, 4])
def test_ddp_parity_with_gloo(size):
    outs = check_ok("ddp", size)
    assert all("ddp parity ok" in o for o in outs)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_sparse_allreduce(size):
    outs = check_ok("sparse", size)
    assert all("sparse ok" in o for o in outs)


def test_tcpstore():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    check_ok("allreduce", 2, env={"TEST_TCP_PORT": str(port)})


def test_unsupported_op_and_bad_tensors():
    outs = check_ok("unsupported", 2)
    for o in outs:
        # bitwise reductions of float32: refused, naming the op and why
        line = [l for l in o.splitlines() if "ReduceOp.BAND" in l]
        assert line and "integer" in line[0], o
        assert "must be contiguous" in o


@pytest.mark.parametrize("size", [2, 3])
def test_different_sizes_raise_on_every_rank(size):
    outs = check_ok("mismatch", size)
    for o in outs:
        assert "allreduce mismatch error" in o and "GCX_ERR_MISMATCH" in o
        assert "broadcast mismatch error" in o
        assert "sparse allreduce mismatch error" in o


@pytest.mark.parametrize("var,value", [("GCX_TIMEOUT", "abc"),
                                       ("GCX_LOG_LEVEL", "loud")])
def test_bad_gcx_variable_names_it(var, value):
    results = launch("badenv", 2, timeout=60, env={var: value})
    for rc, out in results:
        assert rc == 3, out  # creation raised
        line = [l for l in out.splitlines() if l.startswith("creation error")]
        assert line, out
        assert f"{var}='{value}'" in line[0], line[0]
        assert "GCX_ERR_INVALID" in line[0], line[0]


@pytest.mark.parametrize("scenario", ["never_joins", "size_mismatch"])
def test_creation_fails_instead_of_hanging(scenario):
    results = launch(scenario, 2, timeout=90)
    # never_joins: rank 0 waits for a rank that never comes: a timeout.
    # size_mismatch: rank 0 sees rank 1's size at once (a mismatch); rank 1
    # waits for a third rank that does not exist (a timeout naming the key)
    want = {0: "imeout"} if scenario == "never_joins" else \
        {0: "GCX_ERR_MISMATCH", 1: "Timeout waiting for key"}
    for r, what in want.items():
        rc, out = results[r]
        assert rc == 3, out
        line = [l for l in out.splitlines() if l.startswith("creation error")]
        assert line and what in line[0], out
    if scenario == "size_mismatch":
        assert "disagrees on the communicator (size 3 vs 2)" in results[0][1]


def test_peer_death_raises():
    results = launch("peer_death", 2, timeout=90)
    rc, out = results[0]
    assert rc == 0, out
    assert "peer death error" in out, out


def test_exit_with_collective_in_flight_does_not_hang():
    results = launch("exit_inflight", 2, timeout=60)
    for rc, out in results:
        assert rc == 0, out


def test_engine_sleeps_while_waiting_on_tcp():
    # UCX on tcp and self: the engine sleeps on the transport's events by
    # default (it shares the cores with torch's compute); a polling wait
    # (GCX_PROGRESS_SLEEP=n) spends ~0.3 of the wait on the CPU here
    out = check_ok("wait_cpu", 2, timeout=60, env={"UCX_TLS": "tcp,self"})[0]
    line = [l for l in out.splitlines() if l.startswith("wait cpu")]
    assert line, out
    cpu, wall = float(line[0].split()[2]), float(line[0].split()[5])
    assert wall >= 1.5, line[0]  # rank 0 did wait for rank 1
    assert cpu < 0.1 * wall, line[0]  # polling: ~0.3 of the wall time here


def test_import_twice():
    code = ("import importlib, torch_gcx, torch.distributed as dist\n"
            "import torch_gcx as again\n"
            "importlib.reload(torch_gcx)\n"
            "assert dist.Backend.GCX == 'gcx'\n"
            "assert dist.Backend.backend_list.count('gcx') == 1\n"
            "print(torch_gcx.gcx_version())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().count(".") == 2
