"""Which TCP ports a group of processes listens on, from ``/proc`` (Linux): what tells a
server started on the wrong port (FastMCP's quickstart listens on 8000 whatever ``$PORT``
says) from one that is merely slow to start.

- ``listening_ports(table_text, inodes)``: the ports of the LISTEN sockets of a
  ``/proc/net/tcp``/``tcp6`` table among ``inodes`` (pure, for tests);
- ``socket_inodes(pid)``: the inodes of the sockets a process holds open;
- ``ports_of(pids)``: both together; None where there is no ``/proc`` (macOS), so callers
  fall back to waiting as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
TCP_LISTEN = "0A"  # the st column's value for LISTEN (include/net/tcp_states.h)


def listening_ports(table_text: str, inodes: set[int]) -> set[int]:
    """Ports of the LISTEN sockets in a /proc/net/tcp(6) table whose inode is in ``inodes``."""
    ports: set[int] = set()
    for line in table_text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN:
            continue
        try:
            port, inode = int(fields[1].rsplit(":", 1)[1], 16), int(fields[9])
        except (IndexError, ValueError):
            continue
        if inode in inodes:
            ports.add(port)
    return ports


def socket_inodes(pid: int, proc: Path = PROC) -> set[int]:
    """Inodes of the sockets ``pid`` holds (empty when it is gone or not ours to read)."""
    inodes: set[int] = set()
    try:
        fds = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(int(target[8:-1]))
    return inodes


def ports_of(pids: Iterable[int], proc: Path = PROC) -> set[int] | None:
    """TCP ports any of ``pids`` listens on; None when this system has no /proc/net/tcp."""
    tables = [proc / "net" / "tcp", proc / "net" / "tcp6"]
    if not tables[0].exists():
        return None
    inodes: set[int] = set()
    for pid in pids:
        inodes |= socket_inodes(pid, proc)
    if not inodes:
        return set()
    ports: set[int] = set()
    for table in tables:
        try:
            ports |= listening_ports(table.read_text(), inodes)
        except OSError:
            continue
    return ports
