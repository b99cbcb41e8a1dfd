"""One TLS client context per function process (functions/tls.py): the start-up threads
that both need one get the same, built once."""

from __future__ import annotations

import ssl
import threading

from functions import tls


def test_threads_asking_at_once_get_one_context_loaded_once(monkeypatch):
    built: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counting() -> ssl.SSLContext:
        built.append(context := real())
        return context

    monkeypatch.setattr(tls, "_context", None)
    monkeypatch.setattr(tls.ssl, "create_default_context", counting)
    barrier = threading.Barrier(4)
    got: list[ssl.SSLContext] = []

    def ask() -> None:
        barrier.wait()
        got.append(tls.client_context())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(built) == 1 and len(got) == 4 and all(c is built[0] for c in got)
    # and it checks what a default context checks
    assert got[0].verify_mode == ssl.CERT_REQUIRED and got[0].check_hostname


def test_the_secrets_manager_client_follows_no_redirect():
    """An AWS endpoint that answers 3xx is reported as that answer; the place it points to is
    never asked."""
    import http.server
    import urllib.request

    from functions import secrets_manager

    asked: list[str] = []

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            asked.append(self.path)
            if self.path.startswith("/elsewhere"):
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                return
            self.send_response(302)
            self.send_header("location", "/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        request = urllib.request.Request(url, data=b"{}", method="POST")
        assert secrets_manager._open(request, 5)[0] == 302
        assert asked == ["/"]  # /elsewhere never asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
