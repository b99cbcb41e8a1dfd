"""Failing an origin region on purpose, and bringing it back: what ``scripts/run-local
fail REGION`` and ``restore REGION`` ask the running supervisor to do.

Three ways to fail, as a region fails on AWS:

- ``stop``: the origin process is stopped; connections to its port are refused.
- ``error``: the origin is replaced by a server on its port that answers every request
  502 with Lambda's ``Internal Server Error`` body (a function that throws or times out).
- ``hang``: the origin's processes are frozen (SIGSTOP): the kernel still accepts
  connections, nobody answers (a region that stalls).

``restore`` undoes it with the supervisor's own processes: the frozen origin is thawed,
a stopped or replaced one is started again from its spec and waited for. Everything
goes through the supervisor, so Ctrl-C stops whatever a fault started or restarted.

``python -m local.faults serve-errors --port N`` is the error-answering server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from local.supervisor import LOOPBACK, ServiceSpec, Supervisor

MODES = ("stop", "error", "hang")
ERROR_STATUS = 502
ERROR_BODY = b'{"Message":"Internal Server Error"}'
ERROR_TYPE = "Function.Unhandled"


class FaultError(ValueError):
    """A fail or restore the topology cannot do: the message says why, for a person."""


@dataclass(frozen=True)
class Fault:
    region: str
    mode: str
    since: float  # time.time() when it began


def error_service_name(region: str, instance: int = 0) -> str:
    return f"origin-{region}-failing" + (f"-{instance + 1}" if instance else "")


class FaultInjector:
    """Fails and restores the origins of a running topology (``origins``: region -> the
    service specs of the origin's instances, or of its one process), every instance of a
    region at once. Call it from the thread that started the topology: on Linux a child
    dies with the thread that started it."""

    def __init__(self, supervisor: Supervisor, origins: Mapping[str, ServiceSpec | Sequence[ServiceSpec]]):
        self.supervisor = supervisor
        self.origins = {region: (specs,) if isinstance(specs, ServiceSpec) else tuple(specs)
                        for region, specs in origins.items()}
        self.faults: dict[str, Fault] = {}
        self._lock = threading.Lock()

    def _known(self, region: str) -> tuple[ServiceSpec, ...]:
        if region not in self.origins:
            raise FaultError(f"{region!r} is not an origin region of this topology; the regions are "
                             f"{', '.join(self.origins)}")
        return self.origins[region]

    def fail(self, region: str, mode: str = "stop") -> Fault:
        specs = self._known(region)
        if mode not in MODES:
            raise FaultError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        with self._lock:
            if region in self.faults:
                raise FaultError(f"{region} is already failed ({self.faults[region].mode}): restore it first "
                                 f"(scripts/run-local restore {region})")
            for spec in specs:
                service = self.supervisor.services.get(spec.name)
                if service is None or not service.running:
                    raise FaultError(f"the origin of {region} is not running (it exited on its own); its log: "
                                     f"{service.log_path if service else '-'}")
            if mode == "hang":
                for spec in specs:
                    self.supervisor.freeze(spec.name)
            else:
                self.supervisor.stop_many([spec.name for spec in specs])
                if mode == "error":
                    failing = []
                    for i, spec in enumerate(specs):
                        assert spec.port is not None
                        failing.append(ServiceSpec(name=error_service_name(region, i),
                                                   argv=("-m", "local.faults", "serve-errors", "--port", str(spec.port)),
                                                   port=spec.port, port_option=spec.port_option, ready_path=None))
                    self.supervisor.start_all(failing)
            fault = Fault(region, mode, time.time())
            self.faults[region] = fault
            return fault

    def restore(self, region: str) -> Fault:
        specs = self._known(region)
        with self._lock:
            fault = self.faults.get(region)
            if fault is None:
                raise FaultError(f"{region} is not failed: nothing to restore")
            if fault.mode == "hang":
                for spec in specs:
                    self.supervisor.thaw(spec.name)
            else:
                if fault.mode == "error":
                    self.supervisor.stop_many([error_service_name(region, i) for i in range(len(specs))])
                self.supervisor.start_all(list(specs))
            del self.faults[region]
            return fault

    def restore_all(self) -> None:
        for region in list(self.faults):
            with contextlib.suppress(Exception):
                self.restore(region)


# --- the error-answering server ----------------------------------------------------------


async def _answer_errors(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read each request's head (and any body it declares), answer 502; keep-alive."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip() or 0)
            if length:
                await reader.readexactly(length)
            writer.write(b"HTTP/1.1 %d Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                         b"x-amzn-errortype: %s\r\n\r\n%s" % (ERROR_STATUS, len(ERROR_BODY), ERROR_TYPE.encode(),
                                                           ERROR_BODY))
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def serve_errors(port: int, host: str = LOOPBACK) -> None:
    server = await asyncio.start_server(_answer_errors, host, port, reuse_address=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local.faults")
    commands = parser.add_subparsers(dest="command", required=True)
    errors = commands.add_parser("serve-errors", help="answer every request 502, as a failing function URL does")
    errors.add_argument("--port", type=int, required=True)
    errors.add_argument("--host", default=LOOPBACK)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):  # SIGTERM's default action ends it: nothing to clean up
        asyncio.run(serve_errors(args.port, args.host))


if __name__ == "__main__":
    main()
