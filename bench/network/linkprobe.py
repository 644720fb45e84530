#!/usr/bin/env python3
"""Measure one emulated link: TCP round-trip time (alpha) and throughput (beta).

    linkprobe.py server PORT                   (in the receiving namespace)
    linkprobe.py client HOST PORT [SECONDS]    (in the sending namespace)

The client first times 200 one-byte round trips (TCP_NODELAY) and reports the
median half round trip as alpha, then streams 4 MiB writes for SECONDS (default
2) and reports what the server acknowledged receiving, in bytes/s. Prints one
line: "alpha_s=... bytes_per_s=..." (run.sh feeds it to the alpha-beta model).
"""
import socket
import statistics
import struct
import sys
import time


def serve(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    ls.settimeout(30)
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # phase 1: echo single bytes until the client sends b"S"
    while True:
        b = c.recv(1)
        if not b or b == b"S":
            break
        c.sendall(b)
    # phase 2: count bytes until the client closes its side, then report
    total = 0
    buf = bytearray(4 << 20)
    while True:
        n = c.recv_into(buf)
        if n == 0:
            break
        total += n
    c.sendall(struct.pack("!Q", total))
    c.close()


def client(host, port, seconds):
    s = None
    for _ in range(100):  # the server may still be starting
        try:
            s = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            time.sleep(0.05)
    if s is None:
        sys.exit("linkprobe: cannot connect to %s:%d" % (host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(200):
        t0 = time.perf_counter()
        s.sendall(b"p")
        if s.recv(1) != b"p":
            sys.exit("linkprobe: echo failed")
        rtts.append(time.perf_counter() - t0)
    s.sendall(b"S")
    chunk = bytes(4 << 20)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        s.sendall(chunk)
    s.shutdown(socket.SHUT_WR)
    # the server answers after it has read everything: its count over the time
    # until its answer arrives is what the link carried
    hdr = b""
    while len(hdr) < 8:
        b = s.recv(8 - len(hdr))
        if not b:
            sys.exit("linkprobe: no byte count from the server")
        hdr += b
    elapsed = time.perf_counter() - t0
    total = struct.unpack("!Q", hdr)[0]
    print("alpha_s=%.6g bytes_per_s=%.6g" % (statistics.median(rtts) / 2, total / elapsed))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 2.0)
    else:
        sys.exit(__doc__)
