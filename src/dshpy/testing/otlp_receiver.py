"""A loopback OTLP/HTTP receiver, for tests and benchmarks that export telemetry for real.

:class:`OtlpReceiver` listens on 127.0.0.1 (stdlib :mod:`http.server`, one thread per
connection), answers every ``POST /v1/traces`` and ``/v1/metrics`` with 200 and keeps
the request bodies (gunzipped when the exporter compressed them). Point an exporter
at it with ``OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint``. Decoding the bodies
(:meth:`spans`, :meth:`metric_points`) needs the ``opentelemetry-proto`` package; just
receiving them (a benchmark's sink) does not.

    with OtlpReceiver() as receiver:
        subprocess.run([..., "dshpy", "run", "--otel", "hi"], env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        spans = receiver.spans()        # every span received, decoded
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OtlpReceiver"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read their own output
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        self.server.received(self.path, body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()

    def received(self, path: str, body: bytes) -> None:
        with self.lock:
            self.bodies.setdefault(path, []).append(body)


class OtlpReceiver:
    """Receives OTLP/HTTP exports on loopback; the bodies by path, and decoded spans and metric points."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def endpoint(self) -> str:
        """The base URL exporters append ``/v1/traces`` and ``/v1/metrics`` to."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def bodies(self, path: str) -> list[bytes]:
        with self._server.lock:
            return list(self._server.bodies.get(path, []))

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``count`` bodies arrived on ``path`` (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while len(self.bodies(path)) < count:
            assert time.monotonic() < deadline, f"no OTLP export on {path} within {timeout} s"
            time.sleep(0.01)

    def spans(self) -> list[Any]:
        """Every span received (``opentelemetry.proto.trace.v1.Span`` messages), in arrival order."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        found = []
        for body in self.bodies("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    found.extend(scope.spans)
        return found

    def metrics(self) -> dict[str, list[Any]]:
        """Every metric received, by name (``opentelemetry.proto.metrics.v1.Metric`` messages)."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        found: dict[str, list[Any]] = {}
        for body in self.bodies("/v1/metrics"):
            request = ExportMetricsServiceRequest.FromString(body)
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        found.setdefault(metric.name, []).append(metric)
        return found
