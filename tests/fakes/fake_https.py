"""fake_https.py: what the fake servers in this folder share (they are fakes only because
no kube-apiserver or Trainer control plane can be installed on the test machines).

- `status()`: a metav1.Status error body, as both the Kubernetes API and Trainer's status
  server send them.
- `FakeHandler`: HTTP/1.1 with JSON answers and quiet logs; `read_request()` reads the body,
  counts the request, and plays a stalled server for the first `--stall` requests.
- `serve()`: HTTPS on an ephemeral port of 127.0.0.1 (a CA made by make_test_ca.sh), the
  port written atomically to --port-file for the test to read.
"""
import json
import os
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


LOG_LOCK = threading.Lock()


def status(code, reason, message, name=None, kind=None, causes=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if name is not None or kind is not None:
        body["details"] = {"name": name or "", "kind": kind or ""}
        if causes:
            body["details"]["causes"] = causes
    return code, body


class FakeHandler(BaseHTTPRequestHandler):
    """Subclasses set `state` (with .lock, .requests and .args.stall, .args.stall_seconds)
    and define handle_any()."""
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, fmt, *args):  # quiet: the fakes log requests to --log
        pass

    def send_json(self, code, body, headers=None):
        data = (json.dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, text):
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def write_log(self, entry):
        """One JSON line per request in --log (never a Secret's data)."""
        with LOG_LOCK, open(self.state.args.log, "a") as log:  # not state.lock: replies come under it
            log.write(json.dumps(entry) + "\n")

    def read_request(self):
        """The body, or None when this request plays a stalled server (the client must time out)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        st = self.state
        with st.lock:
            st.requests += 1
            n = st.requests
        if n <= st.args.stall:
            time.sleep(st.args.stall_seconds)
            self.close_connection = True
            return None
        return raw

    def do_GET(self):
        self.handle_any()

    def do_PUT(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def do_PATCH(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()


def serve(handler, args, address="127.0.0.1"):
    server = ThreadingHTTPServer((address, 0), handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()
