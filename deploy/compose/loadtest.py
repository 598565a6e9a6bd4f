#!/usr/bin/env python3
"""Load deploy/compose (up.sh first), kill one replica mid-load, stop another gracefully,
and report what clients saw.

    python3 deploy/compose/loadtest.py [--phase-seconds 20] [--clients 6] [--json FILE]

Clients (standard library only, loopback to the balancer) mix stateless evaluations with
sessions: each session's code increments a counter kept in the session, so an answer with
the wrong count, or a 404, would mean a request reached a replica that does not hold the
session. Phases: `before`; `kill` (`docker kill` of one replica holding sessions);
`drain` (`docker stop`, SIGTERM and the grace period, of another); `after`.

Reports requests answered, errors by kind, p50/p99 per phase, the sessions lost on the
kill (only the killed replica's may be), the sessions of the drained replica that carried
over (with --snapshot-dir on a shared volume) or were lost, and whether any request of a
surviving session went astray. Exits 1 when a session of a replica that stayed up saw an
error or a wrong count, or when a session of the killed replica was not answered as lost.
"""
import argparse
import collections
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def node_of(session):
    # s-<node>-<32 hex>
    return session[2:].rsplit("-", 1)[0]


class Client:
    def __init__(self, host, port, token):
        self.host, self.port, self.token = host, port, token
        self.conn = None

    def request(self, method, path, body=None, timeout=60):
        headers = {"authorization": f"Bearer {self.token}", "content-type": "application/json"}
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                raw = response.read()
                try:
                    payload = json.loads(raw) if raw else None
                except ValueError:
                    payload = None
                return response.status, payload
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                self.conn.close()
                self.conn = None
                # A kept-alive connection the balancer closed: one fresh try.
                if attempt == 1 or not isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError)):
                    return None, {"error": {"code": type(e).__name__, "message": str(e)}}
        return None, None


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.phase = "before"
        self.records = []  # (phase, kind, status, code, seconds)

    def add(self, kind, status, payload, seconds):
        code = None
        if status != 200 and status != 201:
            code = (payload or {}).get("error", {}).get("code") if isinstance(payload, dict) else None
        with self.lock:
            self.records.append((self.phase, kind, status, code, seconds))


def stateless(client, recorder, stop):
    while not stop.is_set():
        a, b = random.randint(1, 1000), random.randint(1, 1000)
        start = time.monotonic()
        status, payload = client.request("POST", "/v1/eval", {"code": f"{a} + {b}"})
        recorder.add("eval", status, payload, time.monotonic() - start)
        if status == 200 and payload.get("value") != a + b:
            recorder.add("eval_wrong_value", 0, None, 0)
        elif status == 429:
            # Over the token's rate on this replica: back off as a client should.
            time.sleep(0.5)


class Session:
    def __init__(self, sid):
        self.id, self.node, self.count = sid, node_of(sid), 0
        self.lost_status = None  # the answer that said it is gone (status, code)
        self.astray = []  # answers that were neither right nor "lost"
        self.done = False


def session_worker(client, recorder, stop, mine):
    while not stop.is_set():
        live = [s for s in mine if not s.done]
        if not live:
            time.sleep(0.2)
            continue
        s = random.choice(live)
        start = time.monotonic()
        status, payload = client.request(
            "POST", f"/v1/sessions/{s.id}/execute",
            {"code": "if (!exists('n')) n <- 0; n <- n + 1; n"})
        recorder.add("execute", status, payload, time.monotonic() - start)
        if status == 200 and payload.get("value") == s.count + 1:
            s.count += 1
        elif status == 200 and payload.get("value") == 1 and s.count > 0:
            # A fresh session under the old id would restart the count: state lost
            # silently, the worst answer there is.
            s.astray.append(("restarted_count", s.count))
            s.done = True
        elif status == 429:
            # Over the token's rate: back off as a client should (counted in the errors).
            time.sleep(0.5)
        elif status in (404, 410):
            s.lost_status = (status, (payload or {}).get("error", {}).get("code"))
            s.done = True
        else:
            s.astray.append((status, (payload or {}).get("error", {}).get("code") if isinstance(payload, dict) else None))


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p / 100 * len(values)))] * 1000, 1)


def replicas():
    out = subprocess.run(["docker", "ps", "--filter", "label=com.docker.compose.project=rsandbox",
                          "--filter", "label=com.docker.compose.service=rsandbox",
                          "--format", "{{.ID}} {{.Names}}"], capture_output=True, text=True, check=True)
    return dict(line.split() for line in out.stdout.splitlines())  # short id (= node tag) -> name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=6, help="half stateless, half with sessions")
    parser.add_argument("--json", help="write the report here too")
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--no-carry-over", dest="carry_over", action="store_false",
                        help="the replicas run without --snapshot-dir: a drained replica's sessions are lost")
    args = parser.parse_args()
    # One token per client (up.sh writes eight): the per-token rate limit stays a limit
    # of one client's, as in real use.
    tokens = [line.split(":", 1)[1].strip() for line in open(os.path.join(HERE, "tokens")) if ":" in line]
    nodes = replicas()
    if len(nodes) < 3:
        sys.exit(f"loadtest: {len(nodes)} replicas running; start deploy/compose/up.sh first")

    recorder, stop = Recorder(), threading.Event()
    # Sessions first, until every replica holds a few (the balancer may still be taking a
    # just-started replica into service).
    clients = [Client("127.0.0.1", args.port, tokens[i % len(tokens)]) for i in range(args.clients)]
    owners = clients[1::2]  # the session workers; a session belongs to its creator's token
    shares, sessions = [[] for _ in owners], []
    for attempt in range(200):
        holding = collections.Counter(s.node for s in sessions)
        if len(sessions) >= 18 and all(holding[n] >= 3 for n in nodes):
            break
        status, payload = owners[attempt % len(owners)].request("POST", "/v1/sessions", {})
        recorder.add("create", status, payload, 0)
        if status == 201:
            session = Session(payload["session"])
            sessions.append(session)
            shares[attempt % len(owners)].append(session)
        else:
            time.sleep(0.2)
    threads = []
    for i, client in enumerate(clients):
        if i % 2 == 0:
            threads.append(threading.Thread(target=stateless, args=(client, recorder, stop), daemon=True))
        else:
            share = shares[i // 2]
            threads.append(threading.Thread(target=session_worker, args=(client, recorder, stop, share), daemon=True))
    for t in threads:
        t.start()
    time.sleep(args.phase_seconds)

    holding = collections.Counter(s.node for s in sessions)
    by_sessions = [n for n, _ in holding.most_common() if n in nodes]
    if len(by_sessions) < 3:
        stop.set()
        sys.exit(f"loadtest: sessions landed on {len(by_sessions)} replica(s); need three (kill, drain, survive)")
    # The replica with the most sessions survives (the check that nothing goes astray
    # needs survivors); the next is killed, the last drained.
    killed, drained = by_sessions[1], by_sessions[2]
    with recorder.lock:
        recorder.phase = "kill"
    subprocess.run(["docker", "kill", nodes[killed]], capture_output=True, check=True)
    time.sleep(args.phase_seconds)
    with recorder.lock:
        recorder.phase = "drain"
    drain_start = time.monotonic()
    subprocess.run(["docker", "stop", "-t", "40", nodes[drained]], capture_output=True, check=True)
    drain_seconds = time.monotonic() - drain_start
    time.sleep(args.phase_seconds)
    with recorder.lock:
        recorder.phase = "after"
    time.sleep(args.phase_seconds)
    stop.set()
    for t in threads:
        t.join(timeout=90)

    phases = ["before", "kill", "drain", "after"]
    report = {"replicas": len(nodes), "killed": killed, "drained": drained,
              "drain_seconds": round(drain_seconds, 1), "phases": {}}
    for phase in phases:
        rows = [r for r in recorder.records if r[0] == phase]
        ok = [r for r in rows if r[2] in (200, 201)]
        errors = collections.Counter(f"{r[1]}:{r[2]}:{r[3]}" for r in rows if r[2] not in (200, 201))
        report["phases"][phase] = {
            "requests": len(rows), "answered_ok": len(ok), "errors": dict(errors),
            "p50_ms": percentile([r[4] for r in ok if r[1] != "create"], 50),
            "p99_ms": percentile([r[4] for r in ok if r[1] != "create"], 99),
        }
    def group(node):
        return [s for s in sessions if s.node == node]
    survivors = [s for s in sessions if s.node not in (killed, drained)]
    report["sessions"] = {
        "created": len(sessions),
        "on_killed_replica": len(group(killed)),
        "lost_on_kill": sum(1 for s in group(killed) if s.lost_status),
        "lost_answers": sorted({str(s.lost_status) for s in sessions if s.lost_status}),
        "on_drained_replica": len(group(drained)),
        "carried_over_on_drain": sum(1 for s in group(drained) if not s.lost_status and not s.astray),
        "lost_on_drain": sum(1 for s in group(drained) if s.lost_status),
        "surviving": len(survivors),
        "surviving_with_errors": sum(1 for s in survivors if s.astray or s.lost_status),
        # Answers other than the right count or "lost": for a surviving session any is a
        # failure; for the killed or drained replica's, the balancer's 502/503 until it
        # marks the replica down are expected (they are in the phase's errors).
        "astray": [(s.id, s.astray[:3]) for s in survivors if s.astray][:10],
        "restarted_count": sum(1 for s in sessions if any(a[0] == "restarted_count" for a in s.astray)),
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    s = report["sessions"]
    killed_answers = {s.lost_status for s in group(killed)}
    failed = (s["surviving_with_errors"] > 0 or s["lost_on_kill"] != s["on_killed_replica"]
              or s["restarted_count"] > 0 or killed_answers != {(410, "session_lost")}
              or (args.carry_over and s["carried_over_on_drain"] != s["on_drained_replica"]))
    print("loadtest: " + ("FAILED" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
