"""Serving an in-process HTTP server on 127.0.0.1 for the duration of a block, for the stand-ins and the fault proxy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """Serve `server` (bound to 127.0.0.1) from a daemon thread while the block runs; its base URL. Then it is shut
    down, closed and its thread joined."""
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
