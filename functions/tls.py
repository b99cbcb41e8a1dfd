"""The process's one TLS client context (the system's CA store, loaded once).

Loading the store costs about 30 ms of CPU (measured here: ``ssl.create_default_context()``
32 ms, and every ``urllib.request.build_opener()`` builds one of its own), so the clients a
function process starts with share this one instead of each loading the store: the
probe's HTTP client and its Secrets Manager read (``secrets_manager.py``).

Its users must not change it in ways another user would notice. httpcore (the probe's
client) sets its ALPN list to HTTP/1.1 on each connection, which every user here speaks;
a client offering h2 on it would need a context of its own.

Every function package ships this file as its own ``tls`` module (as ``contract.py``).
"""

from __future__ import annotations

import ssl
import threading

_context: ssl.SSLContext | None = None
_lock = threading.Lock()


def client_context() -> ssl.SSLContext:
    """The shared context (certificate and host name checks on, as ``ssl.create_default_context``)."""
    global _context
    with _lock:  # two start-up threads ask at once: one of them loads the store
        if _context is None:
            _context = ssl.create_default_context()
        return _context
