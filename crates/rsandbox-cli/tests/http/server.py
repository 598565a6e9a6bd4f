"""`rsandbox serve --http` as a child process for the HTTP tests: its address, its log
lines (JSON, read as they come so the server never blocks on a full stderr pipe), its
memory and its processes, and a clean stop."""
import json
import os
import re
import signal
import subprocess
import threading
import time

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


class Server:
    def __init__(self, binary, *args, node=None):
        # node: the server's node tag (RSANDBOX_NODE_ID); ids of another node are
        # session_lost (410), of its own and unknown, unknown_session (404).
        env = dict(ENV, RSANDBOX_NODE_ID=node) if node else ENV
        self.proc = subprocess.Popen([binary, "serve", "--http", "127.0.0.1:0", "--prefork", "2", *args], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, f"no address on stderr: {line!r}"
        self.url = found.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])
        self.log = []
        self.other_lines = []
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self):
        for line in self.proc.stderr:
            try:
                self.log.append(json.loads(line))
            except ValueError:
                self.other_lines.append(line)

    def children(self):
        """Processes below the server (the zygote and its sandboxes)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def descendants(self):
        """Every process below the server, sandboxes of sandboxes included."""
        found, frontier = [], [self.proc.pid]
        while frontier:
            out = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(map(str, frontier))], capture_output=True, text=True).stdout
            frontier = [int(p) for p in out.split()]
            found += frontier
        return found

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])

    def stop(self, wait=60):
        """SIGTERM: exit 0, and nothing the server started is left."""
        below = self.descendants()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=wait)
        self._reader.join(timeout=10)
        assert code == 0, f"SIGTERM ends the server cleanly, got {code}: {self.other_lines[-5:]}"
        deadline = time.time() + 10
        while any(os.path.exists(f"/proc/{p}") for p in below) and time.time() < deadline:
            time.sleep(0.1)
        left = [p for p in below if os.path.exists(f"/proc/{p}")]
        assert not left, f"processes of the server still alive: {left}"
        assert not self.other_lines, f"log lines that are not JSON: {self.other_lines[:5]}"
