"""A small OTLP/HTTP trace receiver for the trace tests (tests/cli/traces.rs).

    otlp_receiver.py SPANS_FILE

Listens on a free loopback port and prints `listening on http://ADDR` as
its first line on stdout. Each POST /v1/traces (protobuf) is decoded as an
`ExportTraceServiceRequest` (opentelemetry-proto's generated messages) and
its spans appended to SPANS_FILE, one JSON object a line; the request's
body is appended as it came to SPANS_FILE.raw, so a test can look for a
string in everything sent. A GET of any other path answers 200 `ok` (a
target for a plugin's outbound request). Runs until killed.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()


def any_value(value):
    """An OTLP AnyValue as the Python value it holds."""
    case = value.WhichOneof("value")
    if case is None:
        return None
    if case == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if case == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if case == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, case)


def attributes(pairs):
    return {kv.key: any_value(kv.value) for kv in pairs}


def span_lines(request):
    """The request's spans, each with its resource's attributes."""
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": attributes(span.attributes),
                    "events": [
                        {"name": e.name, "attributes": attributes(e.attributes)}
                        for e in span.events
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                    "scope": scope_spans.scope.name,
                    "resource": resource,
                }


class Handler(BaseHTTPRequestHandler):
    spans_file = ""

    def answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            return self.answer(404, "text/plain", b"not an OTLP trace endpoint")
        if self.headers.get("Content-Type") != "application/x-protobuf":
            return self.answer(415, "text/plain", b"protobuf only")
        request = ExportTraceServiceRequest.FromString(body)
        lines = "".join(json.dumps(span) + "\n" for span in span_lines(request))
        with LOCK:
            with open(self.spans_file + ".raw", "ab") as raw:
                raw.write(body)
            with open(self.spans_file, "a", encoding="utf-8") as spans:
                spans.write(lines)
        response = ExportTraceServiceResponse().SerializeToString()
        self.answer(200, "application/x-protobuf", response)

    def do_GET(self):
        self.answer(200, "text/plain", b"ok")

    def log_message(self, format, *args):
        # Quiet: a request's line may hold what the test looks for.
        pass


def main():
    Handler.spans_file = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
