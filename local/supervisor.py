"""Child processes of the local topology: start, wait until ready, stop without leftovers.

Every child runs in its own session (so a terminal's Ctrl-C reaches only the
supervisor, which then stops the children in order) and therefore in its own process
group: stopping a child signals the whole group, so whatever the child itself forked
goes too. On Linux each child also asks the kernel to SIGTERM it when the supervising
thread dies (``PR_SET_PDEATHSIG``, set by ``local.launch`` before it execs), so even a
``kill -9`` of the supervisor leaves nothing running.

Ports are checked before anything starts: a busy port is reported with the service
that wanted it and the command-line option that moves it. A child given a ``port_hint``
(the origins: a user's server) that listens on other ports than its own, and not on its
own, is stopped after ``WRONG_PORT_GRACE_S`` with a message naming both ports and the hint
(``local.listening`` reads the listening sockets from /proc; elsewhere it is waited for as
any child). A child that exits before it is ready fails the start at once, with its exit
code and the last lines of its log, and the start stops waiting for the others.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from local.listening import ports_of
from stack_config.loading import PROJECT_ROOT

LOOPBACK = "127.0.0.1"
STOP_GRACE_S = 5.0
POLL_INTERVAL_S = 0.05
# How long a child may listen elsewhere, and not on its port, before it is named as on the wrong port
# (a server may open another port first, e.g. for metrics); how often its sockets are read meanwhile.
WRONG_PORT_GRACE_S = 2.0
WRONG_PORT_POLL_S = 0.5


class PortInUseError(RuntimeError):
    """One or more ports the topology needs are taken; the message says which and how to move them."""

    def __init__(self, busy: Sequence[tuple[int, str, str]]):
        self.busy = list(busy)
        lines = [
            f"  - port {port} ({service}) is already in use: free it or choose another with {option}"
            for port, service, option in busy
        ]
        super().__init__("cannot start the local topology:\n" + "\n".join(lines))


class ServiceFailedError(RuntimeError):
    """A child exited or did not become ready in time; carries the tail of its log."""


@dataclass(frozen=True)
class ServiceSpec:
    """One child process and how to know it is ready.

    Readiness is an HTTP GET of ``ready_path`` on ``port`` answering below 500 (or a
    TCP connect when ``ready_path`` is None), or ``ready_file`` existing (for
    children without a port); the child must also still be running.
    """

    name: str
    argv: tuple[str, ...]
    port: int | None = None
    port_option: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    ready_path: str | None = "/"
    ready_file: Path | None = None
    ready_timeout_s: float = 60.0
    cwd: Path | None = None
    # How to start it on its port, e.g. "e.g. uvicorn app:app --port $PORT": set, the child is
    # watched for listening on other ports instead (see the module's docstring).
    port_hint: str = ""


@dataclass
class Service:
    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    stopping: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could bind ``host:port`` now (with SO_REUSEADDR, as uvicorn does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports free right now (held together while choosing, so no repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def check_ports(specs: Iterable[ServiceSpec]) -> None:
    """Raise PortInUseError naming every busy or doubly-assigned port."""
    busy: list[tuple[int, str, str]] = []
    claimed: dict[int, str] = {}
    for spec in specs:
        if spec.port is None:
            continue
        if spec.port in claimed:
            busy.append((spec.port, f"{spec.name}, also given to {claimed[spec.port]}", spec.port_option))
            continue
        claimed[spec.port] = spec.name
        if not 0 < spec.port < 65536:
            raise ValueError(f"port {spec.port} of {spec.name} is not a TCP port (1-65535); change {spec.port_option}")
        if not port_is_free(spec.port):
            busy.append((spec.port, spec.name, spec.port_option))
    if busy:
        raise PortInUseError(busy)


def wrong_port_message(service: Service, ports: Sequence[int]) -> str:
    """What a server listening elsewhere than on its $PORT is told."""
    spec = service.spec
    listens = ", ".join(map(str, ports))
    return (f"{spec.name}: your server listens on {listens}; start it on $PORT ({spec.port} here, as on Lambda, "
            f"where the Web Adapter sets PORT and forwards to it) ({spec.port_hint}). Its log "
            f"({service.log_path}) ends with:\n{service.log_tail()}")


def _http_ready(port: int, path: str, timeout_s: float = 1.0) -> bool:
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        return conn.getresponse().status < 500
    except OSError:
        return False
    finally:
        conn.close()


def _tcp_ready(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after ``pid (comm)`` (state, ppid, pgrp, ...;
    comm may hold spaces and parentheses), or None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the group ``pgid``.

    Read from /proc where there is one: a killed orphan stays a zombie until init
    reaps it (in containers, maybe never), and a zombie still counts for killpg.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(entry.name)
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` is still running."""
    return bool(group_members(pgid))


class Supervisor:
    """Starts children, waits for them, stops them (newest first) and leaves nothing behind.

    Use as a context manager, or call ``stop_all`` in a ``finally``. Start children
    from a thread that outlives them: on Linux they are signalled when it exits.
    """

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.services: dict[str, Service] = {}
        self._batches: list[list[str]] = []
        self._lock = threading.Lock()

    # --- starting -------------------------------------------------------------------
    def start(self, spec: ServiceSpec) -> Service:
        if spec.name in self.services and self.services[spec.name].running:
            raise RuntimeError(f"service {spec.name} is already running (pid {self.services[spec.name].pid})")
        if spec.ready_file is not None:
            spec.ready_file.unlink(missing_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        env = {**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"}
        # The children import this project's packages (local.launch first of all).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "local.launch", *spec.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=spec.cwd or PROJECT_ROOT,
                start_new_session=True,
            )
        service = Service(spec, process, log_path)
        with self._lock:
            self.services[spec.name] = service
        return service

    def wait_ready(self, service: Service, abort: threading.Event | None = None) -> None:
        """Until the child is ready; ServiceFailedError when it exits first, listens on the wrong
        port (with a ``port_hint``) or takes longer than its timeout. Returns early when
        ``abort`` is set (another child of the same start failed)."""
        spec = service.spec
        deadline = time.monotonic() + spec.ready_timeout_s
        elsewhere_since: float | None = None
        next_look = time.monotonic()
        while time.monotonic() < deadline:
            if abort is not None and abort.is_set():
                return
            if not service.running:
                raise ServiceFailedError(
                    f"{spec.name} exited with code {service.process.returncode} before it was ready; "
                    f"its log ({service.log_path}) ends with:\n{service.log_tail()}"
                )
            if self._is_ready(spec):
                return
            if spec.port_hint and spec.port is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + WRONG_PORT_POLL_S
                ports = ports_of(group_members(service.pid))
                if ports and spec.port not in ports:
                    elsewhere_since = elsewhere_since or time.monotonic()
                    if time.monotonic() - elsewhere_since >= WRONG_PORT_GRACE_S:
                        raise ServiceFailedError(wrong_port_message(service, sorted(ports)))
                else:
                    elsewhere_since = None
            time.sleep(POLL_INTERVAL_S)
        raise ServiceFailedError(
            f"{spec.name} was not ready within {spec.ready_timeout_s:.0f} s; "
            f"its log ({service.log_path}) ends with:\n{service.log_tail()}"
        )

    @staticmethod
    def _is_ready(spec: ServiceSpec) -> bool:
        if spec.ready_file is not None:
            return spec.ready_file.exists()
        if spec.port is None:
            return True
        if spec.ready_path is None:
            return _tcp_ready(spec.port)
        return _http_ready(spec.port, spec.ready_path)

    def start_all(self, specs: Sequence[ServiceSpec]) -> list[Service]:
        """Check every port, start every child, wait for all of them (concurrently).

        On any failure everything this call started is stopped before raising.
        """
        check_ports(specs)
        self._batches.append([spec.name for spec in specs])
        started: list[Service] = []
        try:
            for spec in specs:
                started.append(self.start(spec))
            errors: list[BaseException] = []
            failed = threading.Event()  # the first failure ends every wait: no minute spent on the others

            def wait(service: Service) -> None:
                try:
                    self.wait_ready(service, failed)
                except BaseException as exc:  # collected, re-raised below
                    errors.append(exc)
                    failed.set()

            threads = [threading.Thread(target=wait, args=(s,), daemon=True) for s in started]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
        except BaseException:
            self.stop_many([s.spec.name for s in started])
            raise
        return started

    # --- watching -------------------------------------------------------------------
    def exited(self) -> list[Service]:
        """Children that exited without being asked to."""
        return [s for s in self.services.values() if not s.stopping and not s.running]

    # --- stopping -------------------------------------------------------------------
    def stop(self, name: str, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the child's process group, SIGKILL it after ``grace_s``, reap the child."""
        self.stop_many([name], grace_s)

    def stop_many(self, names: Sequence[str], grace_s: float = STOP_GRACE_S) -> None:
        """Stop several children at once: SIGTERM to every group, then wait, then SIGKILL what is left."""
        services = [self.services[n] for n in names if n in self.services]
        for service in services:
            service.stopping = True
            _signal_group(service.pid, signal.SIGTERM)  # start_new_session: the child leads its group
            _signal_group(service.pid, signal.SIGCONT)  # a frozen child (``freeze``) gets the SIGTERM now
        deadline = time.monotonic() + grace_s
        for service in services:
            try:
                service.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(service.pid, signal.SIGKILL)
                service.process.wait(timeout=grace_s)
        # The leaders are gone; anything they forked that ignored SIGTERM goes now.
        for service in services:
            while group_alive(service.pid) and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL_S)
            if group_alive(service.pid):
                _signal_group(service.pid, signal.SIGKILL)

    def freeze(self, name: str) -> None:
        """SIGSTOP the child's process group: its port still accepts connections, nothing answers."""
        _signal_group(self.services[name].pid, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        _signal_group(self.services[name].pid, signal.SIGCONT)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every child: the last started batch first (workers before the services they call),
        each batch at once."""
        for batch in reversed(self._batches):
            self.stop_many(batch, grace_s)
        self.stop_many(list(self.services), grace_s)  # started one by one with start()

    def pids(self) -> list[int]:
        return [s.pid for s in self.services.values()]

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
