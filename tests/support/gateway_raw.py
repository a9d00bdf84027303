"""Raw HTTP to a gateway's loopback listener: bytes exactly as a hostile client would send them
(request lines, headers and chunked bodies no HTTP client library would write)."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class Answer:
    status: int | None  # None: the connection closed without an answer
    head: bytes
    body: bytes
    sent: int  # bytes of the request the gateway took before it closed


def connect(base_url: str, timeout: float = 30) -> socket.socket:
    url = urllib.parse.urlsplit(base_url)
    return socket.create_connection((url.hostname, url.port), timeout=timeout)


def head(method: str, target: str, headers: dict[str, str], version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {target} {version}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def exchange(base_url: str, data: bytes | Iterable[bytes], timeout: float = 30) -> Answer:
    """Send ``data`` (bytes, or pieces sent one after the other while the answer is read),
    then read until the gateway closes; one request per connection (Connection: close in the
    head, or the write side shut after sending)."""
    sock = connect(base_url, timeout)
    sent = 0
    received = bytearray()

    def send() -> None:
        nonlocal sent
        pieces = [data] if isinstance(data, bytes) else data
        with contextlib.suppress(OSError):  # the gateway closed: it read no further
            for piece in pieces:
                sock.sendall(piece)
                sent += len(piece)
            sock.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            received += chunk
    sock.close()
    sender.join(timeout)
    head_bytes, _, body = bytes(received).partition(b"\r\n\r\n")
    status = int(head_bytes.split(b" ", 2)[1]) if head_bytes.startswith(b"HTTP/1.1 ") else None
    return Answer(status, head_bytes, body, sent)


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
