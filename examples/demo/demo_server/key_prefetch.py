"""The issuer's key set, downloaded from the moment the origin's process starts.

``app`` imports this module before anything heavy, and importing it starts the
download (``start_from_environment(os.environ)``): when the environment names a
JWKS URL (the origin's process, on Lambda and in the local run), the download runs
in a daemon thread while the SDK, PyJWT and cryptography are imported (about a
second), so the key set is in hand by the time the app is built, instead of being
fetched after it (tens of ms: building urllib's opener loads the CA certificates,
then the round trip). ``auth.BackoffJWKClient`` takes the outcome as its first
fetch: the same bounded read, and a failure counts as a failed fetch, with its
backoff. Standard library only, so that importing it first costs nothing.
"""

from __future__ import annotations

import os
import threading
import urllib.request
from collections.abc import Mapping

from .contract import OriginEnv
from .start_up_gc import origin_process
from .tls import NoRedirect, client_context

# A key set is a few keys: far below this. Bounds what a broken issuer can make us hold.
MAX_KEY_SET_BYTES = 512 * 1024
DEFAULT_TIMEOUT_S = 5.0  # Settings.jwks_timeout_s
DEFAULT_SERVER_NAME = "mcp-edge"  # Settings.server_name


class FetchFailedError(Exception):
    pass


def build_opener() -> urllib.request.OpenerDirector:
    # The process's shared TLS context: urllib's own would load the CA store again (tls.py).
    return urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=client_context()))


def user_agent(server_name: str) -> str:
    return f"{server_name}-mcp-origin"


def download(opener: urllib.request.OpenerDirector, url: str, headers: Mapping[str, str], timeout: float) -> bytes:
    """The key set's bytes (at most ``MAX_KEY_SET_BYTES``), or FetchFailedError saying why not."""
    request = urllib.request.Request(url=url, headers=dict(headers))
    try:
        with opener.open(request, timeout=timeout) as response:
            body: bytes = response.read(MAX_KEY_SET_BYTES + 1)
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, resets, bad URLs
        raise FetchFailedError(f"fetch failed: {type(exc).__name__}: {str(exc)[:200]}") from None
    if len(body) > MAX_KEY_SET_BYTES:
        raise FetchFailedError(f"answer larger than {MAX_KEY_SET_BYTES} bytes")
    return body


class EarlyDownload:
    """One download of ``url`` in a daemon thread; ``result()`` waits for it."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float):
        self.url = url
        self.headers = dict(headers)
        self.timeout = timeout
        self.opener: urllib.request.OpenerDirector | None = None
        self._body: bytes | None = None
        self._error: FetchFailedError | None = None
        self._done = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="jwks-early-download").start()

    def _run(self) -> None:
        try:
            self.opener = build_opener()
            self._body = download(self.opener, self.url, self.headers, self.timeout)
        except FetchFailedError as exc:
            self._error = exc
        except Exception as exc:  # never lose the outcome: the waiter gets a failed fetch
            self._error = FetchFailedError(f"fetch failed: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            self._done.set()

    def result(self) -> bytes:
        """The body, or FetchFailedError (also when the download outlives its timeout)."""
        if not self._done.wait(self.timeout + 1):
            raise FetchFailedError(f"fetch failed: no answer within {self.timeout:.0f} s")
        if self._error is not None:
            raise self._error
        assert self._body is not None
        return self._body


_started: EarlyDownload | None = None
_lock = threading.Lock()


def start_from_environment(environ: Mapping[str, str]) -> EarlyDownload | None:
    """Start the download when ``environ`` names a JWKS URL (values as ``Settings`` reads
    them; anything it would refuse only means no early download)."""
    global _started
    if not origin_process(environ):
        return None
    url = environ[OriginEnv.AUTH_JWKS_URL].strip()
    try:
        timeout = float(int(environ.get("JWKS_TIMEOUT_SECONDS", "") or DEFAULT_TIMEOUT_S))
    except ValueError:
        timeout = DEFAULT_TIMEOUT_S
    name = environ.get(OriginEnv.SERVER_NAME, "") or DEFAULT_SERVER_NAME
    with _lock:
        if _started is None:
            _started = EarlyDownload(url, {"User-Agent": user_agent(name)}, min(max(timeout, 1.0), 60.0))
        return _started


def take(url: str, headers: Mapping[str, str]) -> EarlyDownload | None:
    """The early download of exactly this request (URL and headers), once: the first
    key-set client that asks gets it, any other fetches for itself."""
    global _started
    with _lock:
        early = _started
        if early is None or early.url != url or early.headers != dict(headers):
            return None
        _started = None
        return early


start_from_environment(os.environ)
