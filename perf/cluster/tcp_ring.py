#!/usr/bin/env python3
"""tcp_ring.py: kernel-TCP throughput around a ring, one rank per emulated node.

Idea: every rank sends to rank+1 and receives from rank-1 at the same time, over plain
blocking sockets, for a few seconds; each prints what it received, in Mbit/s of payload.
Unlike ucx_perftest nothing busy-polls, so on a host with few cores this measures the
emulated links (all of them loaded in both directions at once) rather than the CPU.
Run it under emulate.sh, which provides the variables:
    perf/cluster/emulate.sh -n 4 --rate 1gbit -- python3 perf/cluster/tcp_ring.py [SECONDS]
"""
import os
import socket
import sys
import threading
import time

PORT = 5201          # inside the rank namespaces only
CHUNK = 1 << 20


def receive(server, result):
    """Accept rank-1's connection and count bytes until it closes."""
    conn, _ = server.accept()
    total, first = 0, None
    with conn:
        while True:
            data = conn.recv(CHUNK)
            if not data:
                break
            if first is None:
                first = time.monotonic()
            total += len(data)
    result.append((total, time.monotonic() - first if first else 0.0))


def connect(addr, deadline):
    """Connect to rank+1, retrying while it does not listen yet."""
    while True:
        try:
            return socket.create_connection((addr, PORT))
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    rank = int(os.environ["GCX_RANK"])
    size = int(os.environ["GCX_WORLD_SIZE"])
    if size < 2:
        sys.exit("tcp_ring.py needs at least 2 ranks")
    # emulate.sh gives rank i the address <subnet>.<i+1>; rank 0's is GCX_ROOT_ADDR.
    prefix, first = os.environ["GCX_ROOT_ADDR"].rsplit(".", 1)
    peer = "%s.%d" % (prefix, int(first) + (rank + 1) % size)

    server = socket.create_server(("", PORT))
    result = []
    receiver = threading.Thread(target=receive, args=(server, result))
    receiver.start()

    buf = b"\0" * CHUNK
    with connect(peer, time.monotonic() + 10) as sock:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock.sendall(buf)
    receiver.join()
    total, elapsed = result[0]
    rate = total * 8 / elapsed / 1e6 if elapsed > 0 else 0.0
    print("rank %d received from rank %d: %.1f Mbit/s" % (rank, (rank - 1) % size, rate))


if __name__ == "__main__":
    main()
