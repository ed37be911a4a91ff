"""A fault injector in front of a real OpenAI-compatible embedding server, for the RAG tests:
it forwards `POST /v1/embeddings` upstream, except that after `fail_after` forwarded requests
it answers 500 (mode "fail_after"), or every request waits `delay_s` first (mode "slow").
`POST /control` with JSON {"mode": ..., "fail_after": n, "delay_s": s} changes the mode;
"pass" forwards everything. Usage: embed_faults.py PORT UPSTREAM_BASE"""

import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
UPSTREAM = sys.argv[2].rstrip("/")
state = {"mode": "pass", "fail_after": 0, "delay_s": 0.0, "forwarded": 0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/control":
            with lock:
                state.update(json.loads(body))
                state["forwarded"] = 0
            return self.reply(200, state)
        with lock:
            mode, n = state["mode"], state["forwarded"]
            failing = mode == "fail_after" and n >= state["fail_after"]
            if not failing:
                state["forwarded"] += 1
        if failing:
            return self.reply(500, {"error": {"message": "injected failure"}})
        if mode == "slow":
            time.sleep(state["delay_s"])
        req = urllib.request.Request(UPSTREAM + self.path.removeprefix("/v1"), data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            self.reply(r.status, json.loads(r.read()))


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
