"""`nmt serve` under load: 50 concurrent clients sending test-split sentences (1–3 per request), then the same with
one abusive client beside them. Per engine (PyTorch; CTranslate2 float32 and int8) and phase: sentences/s, p50/p99
latency of the good clients, their errors, what the abusive client got, and the server's resident memory at the end of
the phase and its peak so far (Linux).

    python scripts/bench_serve.py --run runs/demo [--duration 60] [--clients 50] [--out results/serve-bench.json]
                                  [--server-env ONEDNN_PRIMITIVE_CACHE_CAPACITY=16]

Phases: `quiet` (the good clients alone); `abusive` (plus one client sending 64 × 1,000 characters at beam 16 in a
loop: the cost budget refuses it with 413); `heavy` (plus one client sending the costliest request the budget admits,
one 1,000-character sentence at beam 16, in a loop: the scheduler must keep the others moving); `impatient` (plus
four clients sending that request with a 1 s timeout, each hanging up and sending it again: the server should drop
what nobody waits for, and /health's `requests_abandoned` counts it). The server runs in its own process
(`nmt serve`), the clients in this one, each with its own keep-alive connection. For a before/after ratio, run an
older tree's server: --server-env PYTHONPATH=/path/to/old/checkout.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nmt.data.dataset import load_references
from nmt.data.prepare import find_prepared
from nmt.run_dir import Run
from results_record import write_record

ABUSIVE = {"sentences": [("we have two cats and three dogs . " * 40)[:1000]] * 64, "beam": 16}
HEAVY = {"sentences": [("we have two cats and three dogs . " * 40)[:1000]], "beam": 16}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, engine: str, model: Path | None, port: int, stderr_log: Path) -> subprocess.Popen:
    """`nmt serve` on `port`, once its /health answers. Its stderr goes to `stderr_log`: a pipe nobody reads while
    the benchmark runs would block the server once full."""
    command = [sys.executable, "-m", "nmt", "serve", "--port", str(port), "--device", "cpu"]
    command += ["--engine", "ctranslate2", "--model", str(model)] if engine != "nmt" else ["--run", str(args.run)]
    env = {**os.environ, **dict(setting.split("=", 1) for setting in args.server_env)}
    with stderr_log.open("w") as stderr:  # the child holds its own descriptor
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.3)
    server.kill()
    server.wait()
    raise SystemExit(f"server did not start: {stderr_log.read_text()[-2000:]}")


def server_memory_mib(pid: int) -> dict:
    """The server's resident set now and its peak so far (VmRSS, VmHWM), MiB; empty where /proc is missing."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if line.startswith(("VmRSS", "VmHWM")))
    except OSError:
        return {}
    return {"server_rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024),
            "server_peak_rss_mib": round(int(fields["VmHWM"].split()[0]) / 1024)}


def client_loop(port: int, payloads, stop: threading.Event, records: list, seed: int, timeout: float = 600) -> None:
    """Send requests back to back until `stop`; record (latency s, status, sentences); -1: no answer in `timeout`
    (the client hangs up and sends the next)."""
    rng = random.Random(seed)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    while not stop.is_set():
        payload = payloads(rng)
        body = json.dumps(payload)
        started = time.perf_counter()
        try:
            connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = -1
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        records.append((time.perf_counter() - started, status, len(payload["sentences"])))


def health(port: int) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/health")
    return json.loads(connection.getresponse().read())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_phase(port: int, sources: list[str], clients: int, duration: float,
              extra: tuple[dict, int, float] | None) -> dict:
    """`clients` good clients, and `extra` = (payload, how many clients send it, their timeout) beside them."""
    stop, good, bad = threading.Event(), [], []

    def small(rng):
        return {"sentences": rng.sample(sources, rng.randint(1, 3))}

    threads = [threading.Thread(target=client_loop, args=(port, small, stop, good, i)) for i in range(clients)]
    if extra is not None:
        payload, count, timeout = extra
        threads += [threading.Thread(target=client_loop, args=(port, lambda rng: payload, stop, bad, -1 - i, timeout))
                    for i in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(duration)
    stop.set()
    for thread in threads:
        thread.join()
    ok = [r for r in good if r[1] == 200]
    latencies = [r[0] * 1000 for r in ok]
    result = {"requests": len(good), "errors": len(good) - len(ok),
              "sentences_per_s": round(sum(r[2] for r in ok) / duration, 1),
              "p50_ms": round(percentile(latencies, 0.5), 1), "p99_ms": round(percentile(latencies, 0.99), 1)}
    if extra is not None:
        statuses = [r[1] for r in bad]
        result["abusive_client"] = {"requests": len(bad),
                                    "statuses": {str(s): statuses.count(s) for s in set(statuses)},
                                    "median_s": round(statistics.median([r[0] for r in bad]), 2) if bad else None}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--engines", nargs="+", default=["nmt", "ctranslate2-float32", "ctranslate2-int8"])
    parser.add_argument("--phases", nargs="+", default=["quiet", "abusive", "heavy"])
    parser.add_argument("--out", type=Path, default=None, help="JSON record to write (results/...)")
    parser.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment of the server process, e.g. ONEDNN_PRIMITIVE_CACHE_CAPACITY=16")
    args = parser.parse_args()
    run = Run.open(args.run)
    sources, _ = load_references(find_prepared(run.read_config().data, args.data_dir, run.prepared_data()), "test")
    extras = {"quiet": None, "abusive": (ABUSIVE, 1, 600), "heavy": (HEAVY, 1, 600), "impatient": (HEAVY, 4, 1.0)}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines:
            model = None
            if engine.startswith("ctranslate2"):
                model = Path(tmp) / engine
                quantization = engine.split("-", 1)[1]
                subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(args.run), "--quantization",
                                quantization, "-o", str(model)], check=True, capture_output=True)
            port = free_port()
            server = start_server(args, engine, model, port, Path(tmp) / f"{engine}.stderr.log")
            try:
                run_phase(port, sources, 4, 3.0, None)  # warm-up
                for phase in args.phases:
                    result = run_phase(port, sources, args.clients, args.duration, extras[phase])
                    result.update(server_memory_mib(server.pid))
                    result["requests_abandoned"] = health(port).get("requests_abandoned")  # None: an older server
                    results[f"{engine}/{phase}"] = result
                    print(f"{engine:22} {phase:8} {json.dumps(result)}", flush=True)
            finally:
                server.terminate()
                server.wait(timeout=30)
    if args.out:
        write_record(args.out, clients=args.clients, duration_s=args.duration, server_env=args.server_env,
                     results=results)


if __name__ == "__main__":
    main()
