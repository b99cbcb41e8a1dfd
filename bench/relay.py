"""A bare loopback relay: the floor of any second process on a request's path.

    .venv/bin/python -m bench.relay --port LISTEN --to HOST:PORT

Each connection accepted on ``--port`` gets its own connection to ``--to``, and bytes are
moved both ways as they arrive: no HTTP parsing, no function, no router, nothing to
decide. ``bench/local_bench.py`` sends one of its paths through it to the same origin, so
that the edge's figure can be read against what the hop alone costs on the machine that
runs it (two more wake-ups and two more loopback sends a request, and the other processes
meeting each request after a longer gap). Run on uvloop, as the edge is.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

import uvloop


def _no_delay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection: what it reads, its peer writes."""

    def __init__(self, peer: _Pipe | None = None):
        self.peer = peer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _no_delay(transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class _Viewer(_Pipe):
    """The accepted side: what it reads before its own connection to the target is made
    waits for it (uvloop starts reading after ``connection_made``, a pause there or not)."""

    def __init__(self, target: tuple[str, int]):
        super().__init__()
        self.target = target
        self.early: list[bytes] = []
        self._connecting: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.early.append(data)
        else:
            super().data_received(data)

    async def _connect(self) -> None:
        assert self.transport is not None
        try:
            _, upstream = await asyncio.get_running_loop().create_connection(lambda: _Pipe(self), *self.target)
        except OSError:
            self.transport.close()
            return
        self.peer = upstream
        if self.transport.is_closing():  # the viewer left while it connected
            upstream.transport.close()  # type: ignore[union-attr]
            return
        for data in self.early:
            super().data_received(data)
        self.early = []


async def serve(port: int, target: tuple[str, int], host: str = "127.0.0.1") -> None:
    server = await asyncio.get_running_loop().create_server(lambda: _Viewer(target), host, port,
                                                            reuse_address=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the loopback port to listen on")
    parser.add_argument("--to", required=True, help="HOST:PORT to relay each connection to")
    args = parser.parse_args(argv)
    host, _, port = args.to.rpartition(":")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(args.port, (host, int(port))))


if __name__ == "__main__":
    main(sys.argv[1:])
