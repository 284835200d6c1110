"""The listening sockets of ``keymanager serve``: bound once, in the serving process, before any
worker starts, and handed to every worker.

A port another process holds stops the start, naming it (:class:`ListenRefused`): the sockets are
bound with ``SO_REUSEADDR`` (a port a stopped server left in ``TIME_WAIT`` is free again) and never
``SO_REUSEPORT``, and listen at once, so no other process can share them — before, each worker
bound KMIP itself with ``SO_REUSEPORT``, and a second installation on the host silently took
part of the first one's KMIP connections. The workers accept on the same sockets (uvicorn passes
the HTTPS socket to each; the KMIP socket rides with its configuration: ``serving/__init__.py``).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

BACKLOG = 2048
"""Connections the kernel queues before a worker accepts them (uvicorn's default)."""


class ListenRefused(Exception):
    """A port cannot be listened on; the message names it, its setting and why."""


@dataclass(frozen=True)
class Listeners:
    """The service's listening sockets: HTTPS, and KMIP unless it is off."""

    https: socket.socket
    kmip: socket.socket | None

    def close(self) -> None:
        """Close both (the serving process's copies)."""
        self.https.close()
        if self.kmip is not None:
            self.kmip.close()


def bind_listeners(host: str, port: int, kmip_port: int) -> Listeners:
    """Listen on ``host:port`` (HTTPS) and, unless ``kmip_port`` is 0, ``host:kmip_port`` (KMIP).

    Raises ListenRefused naming the port (and closes what it bound) when one cannot be bound:
    held by another process, not this user's to bind, or no address of this machine.
    """
    https = _listening(host, port, "HTTPS", "KM_PORT or --port")
    if not kmip_port:
        return Listeners(https, None)
    try:
        kmip = _listening(host, kmip_port, "KMIP", "KM_KMIP_PORT; 0 turns KMIP off")
    except ListenRefused:
        https.close()
        raise
    return Listeners(https, kmip)


def _listening(host: str, port: int, what: str, setting: str) -> socket.socket:
    """A socket listening on ``host:port`` (IPv6 when ``host`` holds a colon, as uvicorn binds)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        why = "another process is listening on it" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise ListenRefused(f"the {what} port {port} on {host} cannot be used: {why} ({setting})") from None
    sock.set_inheritable(True)
    return sock


_kmip_socket: socket.socket | None = None


def hand_over_kmip(sock: socket.socket | None) -> None:
    """In a worker, before its app is made: the KMIP socket the serving process bound (None: none)."""
    global _kmip_socket
    _kmip_socket = sock


def kmip_socket() -> socket.socket | None:
    """The KMIP socket handed to this worker, if any (:func:`hand_over_kmip`)."""
    return _kmip_socket
