"""The running topology's control channel: ``scripts/run-local fail|restore|faults`` and
the status page's operator section talk to the supervising ``up`` through it.

A unix socket in the run folder (``.local/<stack>/control.sock``, in a folder only its
owner can enter): each connection sends one JSON request line and reads one JSON
answer line. Requests are queued and carried out by ``ControlServer.pump`` on the
thread that started the topology, because on Linux a child dies with the thread that
started it (``local.launch``): a restarted origin must belong to the thread that
stays. Reading the faults starts nothing and is answered at once, so the status
page never waits for a restore in progress.

Requests: ``{"op": "fail", "region": R, "mode": "stop"|"error"|"hang", "for_s": N?}``,
``{"op": "restore", "region": R}``, ``{"op": "faults"}``. Answers: ``{"ok": true,
"message": ..., "faults": [...]}`` or ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from local.faults import MODES, FaultError, FaultInjector

SOCKET_NAME = "control.sock"
ANSWER_TIMEOUT_S = 150.0  # a restore waits for the origin to be ready again (its warm-up included)
MAX_REQUEST_BYTES = 4096


class ControlError(RuntimeError):
    """The running topology could not be reached, or refused the request (message for a person)."""


def control_socket_in(run_dir: str | Path) -> Path:
    return Path(run_dir) / SOCKET_NAME


@dataclass
class _Pending:
    request: dict[str, Any]
    answer: dict[str, Any] | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Operator:
    """What the control channel's requests do: fail and restore origins, and restore a
    fault given ``for_s`` on its own when that time is up (``tick``)."""

    def __init__(self, injector: FaultInjector, clock: Callable[[], float] = time.monotonic):
        self.injector = injector
        self.clock = clock
        self.restore_at: dict[str, float] = {}

    def faults(self) -> list[dict[str, Any]]:
        return [{**asdict(f), "restore_in_s": round(self.restore_at[f.region] - self.clock())
                 if f.region in self.restore_at else None} for f in list(self.injector.faults.values())]

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op, region = request.get("op"), str(request.get("region", ""))
        try:
            if op == "fail":
                mode = str(request.get("mode") or "stop")
                self.injector.fail(region, mode)
                message = {"stop": f"stopped the origin of {region}: connections are refused",
                           "error": f"the origin of {region} answers every request 502",
                           "hang": f"the origin of {region} is frozen: it accepts connections and never answers"}[mode]
                if request.get("for_s") is not None:
                    self.restore_at[region] = self.clock() + float(request["for_s"])
                    message += f"; restored in {float(request['for_s']):g} s"
            elif op == "restore":
                self.injector.restore(region)
                self.restore_at.pop(region, None)
                message = f"restored the origin of {region}: it answers again"
            elif op == "faults":
                message = f"{len(self.injector.faults)} region(s) failed"
            else:
                return {"ok": False, "error": f"unknown request {op!r}: use fail, restore or faults"}
        except FaultError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "message": message, "faults": self.faults()}

    def tick(self) -> list[str]:
        """Restore every fault whose time is up; what was done, for the console."""
        done = []
        for region, at in list(self.restore_at.items()):
            if self.clock() >= at:
                answer = self.handle({"op": "restore", "region": region})
                self.restore_at.pop(region, None)
                done.append(answer.get("message") or answer.get("error", ""))
        return done


READ_ONLY_OPS = frozenset({"faults"})


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    pending: queue.Queue[_Pending]
    handle_now: Callable[[dict[str, Any]], dict[str, Any]]


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES)
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            answer: dict[str, Any] = {"ok": False, "error": f"a request is one JSON object on one line: {exc}"}
        else:
            if request.get("op") in READ_ONLY_OPS:
                self.wfile.write(json.dumps(self.server.handle_now(request)).encode() + b"\n")
                return
            pending = _Pending(request)
            self.server.pending.put(pending)
            answer = (pending.answer or {"ok": False, "error": "no answer"}) if pending.done.wait(ANSWER_TIMEOUT_S) \
                else {"ok": False, "error": f"the topology did not answer within {ANSWER_TIMEOUT_S:.0f} s"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class ControlServer:
    """Listens on ``path``; ``pump`` carries out queued requests with ``handle``."""

    def __init__(self, path: Path, handle: Callable[[dict[str, Any]], dict[str, Any]]):
        self.path = path
        self.handle = handle
        path.unlink(missing_ok=True)  # a previous run's, killed before it could clean up
        self.server = _Server(str(path), _Handler)
        path.chmod(0o600)
        self.server.pending = queue.Queue()
        self.server.handle_now = handle
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="control", daemon=True)
        self.thread.start()

    def pump(self, timeout_s: float) -> bool:
        """Carry out one queued request (waiting up to ``timeout_s`` for one); whether there was one."""
        try:
            pending = self.server.pending.get(timeout=timeout_s)
        except queue.Empty:
            return False
        try:
            pending.answer = self.handle(pending.request)
        except Exception as exc:  # answered, never left waiting; the console shows it too
            pending.answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            pending.done.set()
        return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.path.unlink(missing_ok=True)
        while True:  # nobody waits forever on a request that will not be carried out
            try:
                pending = self.server.pending.get_nowait()
            except queue.Empty:
                break
            pending.answer = {"ok": False, "error": "the topology is stopping"}
            pending.done.set()


def request(path: Path, payload: dict[str, Any], timeout_s: float = ANSWER_TIMEOUT_S + 5) -> dict[str, Any]:
    """Send one request to the running topology; its answer. ControlError when none runs."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise ControlError(f"no running topology answers on {path}: start it with scripts/run-local") from None
        sock.sendall(json.dumps(payload).encode() + b"\n")
        with sock.makefile("rb") as answer:
            line = answer.readline()
    except TimeoutError:
        raise ControlError(f"the running topology did not answer within {timeout_s:.0f} s") from None
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    if not line:
        raise ControlError("the running topology closed the connection without answering (is it stopping?)")
    return dict(json.loads(line))


__all__ = ["MODES", "ControlError", "ControlServer", "Operator", "control_socket_in", "request"]
