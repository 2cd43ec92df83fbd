"""Frames on a socket between the grader and a worker: ``>I`` header length, the UTF-8 JSON header, then the raw
blobs it lists (``header["blobs"]`` = their sizes). No torch here: the grader can talk before it imports torch.

The grader reads with a deadline for the WHOLE frame (`recv(..., deadline=...)`): a worker that trickles one byte
at a time cannot hold a grading thread past it, whatever each single read does.
"""
from __future__ import annotations

import json
import socket
import struct
import time

MAX_HEADER = 1 << 20
MAX_BLOBS = 256


class WireError(Exception):
    """The peer sent something that is not a valid frame (or hung up)."""


def send(sock: socket.socket, header: dict, blobs: list[bytes] = (), deadline: float | None = None) -> None:
    """Send one frame; with a `deadline` (time.monotonic()), the whole send must finish by then (socket.timeout)."""
    header = dict(header, blobs=[len(b) for b in blobs])
    data = json.dumps(header, separators=(",", ":")).encode()
    for part in (struct.pack(">I", len(data)) + data, *blobs):
        _settle(sock, deadline)
        sock.sendall(part)  # since Python 3.5 the timeout bounds the whole sendall


def recv(sock: socket.socket, max_bytes: int, deadline: float | None = None,
         max_header: int = MAX_HEADER) -> tuple[dict, list[bytes]]:
    """Read one frame; raise WireError on EOF, oversize or malformed data, socket.timeout past the `deadline`."""
    (n,) = struct.unpack(">I", _exact(sock, 4, deadline))
    if n > max_header:
        raise WireError(f"header of {n} bytes is too large")
    try:
        header = json.loads(_exact(sock, n, deadline))
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, an int of 5,000 digits, nesting too deep
        raise WireError(f"header is not JSON: {type(e).__name__}") from None
    sizes = header.get("blobs", []) if isinstance(header, dict) else None
    if not isinstance(sizes, list) or len(sizes) > MAX_BLOBS or \
            not all(type(s) is int and s >= 0 for s in sizes):
        raise WireError("bad blob list")
    if sum(sizes) > max_bytes:
        raise WireError(f"reply of {sum(sizes)} bytes exceeds the {max_bytes}-byte limit")
    return header, [_exact(sock, s, deadline) for s in sizes]


def _settle(sock: socket.socket, deadline: float | None) -> None:
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        sock.settimeout(left)


def _exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        _settle(sock, deadline)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("connection closed")
        got += k
    return bytes(buf)
