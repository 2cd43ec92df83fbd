"""Frames on a socket between the grader and a worker: ``>I`` header length, the UTF-8 JSON header, then the raw
blobs it lists (``header["blobs"]`` = their sizes). No torch here: the grader can talk before it imports torch."""
from __future__ import annotations

import json
import socket
import struct

MAX_HEADER = 1 << 20


class WireError(Exception):
    """The peer sent something that is not a valid frame (or hung up)."""


def send(sock: socket.socket, header: dict, blobs: list[bytes] = ()) -> None:
    header = dict(header, blobs=[len(b) for b in blobs])
    data = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    for b in blobs:
        sock.sendall(b)


def recv(sock: socket.socket, max_bytes: int) -> tuple[dict, list[bytes]]:
    """Read one frame; raise WireError on EOF, oversize or malformed data (socket timeouts propagate)."""
    (n,) = struct.unpack(">I", _exact(sock, 4))
    if n > MAX_HEADER:
        raise WireError(f"header of {n} bytes is too large")
    try:
        header = json.loads(_exact(sock, n))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireError(f"header is not JSON: {e}") from None
    sizes = header.get("blobs", []) if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise WireError("bad blob list")
    if sum(sizes) > max_bytes:
        raise WireError(f"reply of {sum(sizes)} bytes exceeds the {max_bytes}-byte limit")
    return header, [_exact(sock, s) for s in sizes]


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("connection closed")
        got += k
    return bytes(buf)
