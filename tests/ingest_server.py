"""A local stand-in for a Pyroscope-compatible ``/ingest`` endpoint, for the ``--push`` tests
(tests/test_agent_push.py, tests/test_agent_root.py): a real HTTP server (http.server) on
127.0.0.1, a free port, in a thread; it keeps every request and answers a chosen status."""

from __future__ import annotations

import email
import email.policy
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Ingest:
    """A local /ingest endpoint: every request kept as (path, {param: value}, {field: bytes});
    answers ``status``. With ``hold`` set, the first request waits for ``release``."""

    def __init__(self, status: int = 200, hold: bool = False):
        self.requests: list = []
        self.status, self.hold = status, hold
        self.arrived, self.release = threading.Event(), threading.Event()
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                url = urllib.parse.urlsplit(self.path)
                ingest.requests.append((url.path, dict(urllib.parse.parse_qsl(url.query)),
                                        _form(self.headers["Content-Type"], body)))
                ingest.arrived.set()
                if ingest.hold:
                    ingest.release.wait(30)
                text = b"" if ingest.status == 200 else b"profile rejected: boom\n"
                self.send_response(ingest.status)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *_args):
                pass  # quiet test output

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _form(content_type: str, body: bytes) -> dict:
    """{field name: bytes} of a multipart/form-data body (the stdlib's MIME parser)."""
    msg = email.message_from_bytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body,
                                   policy=email.policy.HTTP)
    assert msg.is_multipart(), content_type
    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in msg.iter_parts()}
