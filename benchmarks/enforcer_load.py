"""/validate latency over TLS under load: `wrk` (Debian package) as a separate process against a real
`gpuledger enforcer serve`.

    python benchmarks/enforcer_load.py [--rate 500] [--seconds 60] [--connections 16] [--tiny]
    (--tiny: 100 req/s for 2 s on 2 connections, and 2 s each unpaced, so the test suite runs this script)

1. Sustained: wrk paced to --rate requests/s in all (its Lua `delay()`: each of the connections waits
   connections/rate s, less ~1 ms for the request itself, between requests) for --seconds, posting a GPU Pod
   CREATE (derived from the real kubewarden request: 1 H100) of a tenant with a quota, so every request goes
   through every policy; p50/p99 and errors.
2. The most it sustains: wrk unpaced for --burst-seconds (15 s), the same request.
3. Baseline, same run: wrk unpaced against GET /healthz (TLS, uvicorn and routing; no decision), as long.
Needs wrk on PATH (`apt-get install wrk`).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from gpuledger.lake import LakeWriter, frame_from_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
H100 = "NVIDIA-H100-80GB-HBM3"


def review_body() -> str:
    doc = json.loads((REPO / "tests/fixtures/admission/kubewarden_loadtesting_pod_create_v1.json").read_text())
    doc = copy.deepcopy(doc)
    doc["request"]["namespace"] = "vision-train"
    spec = doc["request"]["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    spec["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    return json.dumps(doc)


def lake_with_decisions(root: Path) -> Path:
    lake = root / "lake"
    now = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1e6)
    base = {
        "computed_at": now,
        "cluster": "default",
        "tenant": "vision",
        "allocated_gpus": 10.0,
        "spent_usd": 10.0,
        "budget_usd": 1e9,
        "fairshare": 0.4,
        "idle_gpus_now": 0.0,
    }
    rows = [{**base, "gpu_model": H100, "quota_gpus": 1e9}, {**base, "gpu_model": None, "quota_gpus": 1e9}]
    LakeWriter(lake).write("decisions", frame_from_rows("decisions", rows), "bench")
    # Idle GPUs for the idle-hog gate to weigh on every request: 20 tenths of a GPU, 3 h idle (2 GPUs: under
    # the default limit of 4, so the request is admitted after the whole loop).
    hold = {"computed_at": now, "cluster": "default", "tenant": "vision", "namespace": "vision-train", "share": 0.1}
    holds = [
        hold | {"pod": f"nb-{i}", "job_id": f"j{i}", "gpu_uuid": f"G{i}", "idle_since": now - 3 * 3600 * 10**6}
        for i in range(20)
    ]
    LakeWriter(lake).write("idle_holds", frame_from_rows("idle_holds", holds), "bench")
    return lake


def reserved_port() -> int:
    """A loopback port no other program is handed until the server binds it, as Yelp's ephemeral-port-reserve does.

    A port found with bind(0) and closed is free again at once: in the seconds the server takes to start (imports,
    the lake), any process on the machine binding port 0 (test servers, Dask, selenium's chromedriver) may be given
    it, and the server then stops with "address already in use" (bind(0) gave one of 200 such ports in 151 of
    10,000 tries here). Closed after a connection, the port waits in TIME_WAIT for 60 s: bind(0) passes over it
    and a plain bind fails, while the server, which binds with SO_REUSEADDR (asyncio's default), gets it."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = s.accept()
        # The accepting side closes first, so the TIME_WAIT is on the server's address (127.0.0.1:port).
        accepted.close()
        client.close()
    return port


def wrk(url: str, seconds: int, connections: int, script: Path) -> dict:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    ).stdout

    def ms(label):
        m = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return None
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
    return {"rps": rps, "requests": total, "p50_ms": ms("50%"), "p99_ms": ms("99%"), "errors": errors, "raw": out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=500)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--burst-seconds", type=int, default=15, help="each unpaced run [15]")
    ap.add_argument("--tiny", action="store_true", help="2 s runs at 100 req/s on 2 connections: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.rate, a.seconds, a.connections, a.burst_seconds = 100, 2, 2, 2
    if shutil.which("wrk") is None:
        sys.exit("wrk not found: apt-get install wrk")
    tmp = Path(tempfile.mkdtemp(prefix="gl-enforcer-"))
    lake = lake_with_decisions(tmp)
    cfg = tmp / "gl.toml"
    cfg.write_text('[[tenants]]\nname = "vision"\nnamespaces = ["vision-train"]\n')
    gl = [sys.executable, "-m", "gpuledger.cli"]
    subprocess.run([*gl, "enforcer", "certs", "--out", str(tmp / "tls")], check=True, capture_output=True)
    port = reserved_port()
    server = subprocess.Popen(
        [
            *gl,
            "enforcer",
            "serve",
            "--cert",
            str(tmp / "tls/tls.crt"),
            "--key",
            str(tmp / "tls/tls.key"),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--lake",
            str(lake),
            "--config",
            str(cfg),
            "--replica",
            "bench",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "server.log").open("w"),  # a file: a pipe nobody reads would block the server when full
        text=True,
    )
    base = f"https://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                if httpx.get(base + "/readyz", verify=False, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or server.poll() is not None:
                sys.exit("the enforcer did not become ready: " + (tmp / "server.log").read_text())
            time.sleep(0.2)
        answer = httpx.post(base + "/validate", content=review_body(), verify=False).json()["response"]
        assert answer["allowed"] is True, answer
        body = json.dumps(review_body())
        # Each connection's cycle is its delay plus the request's own time (~1 ms here): take that off the delay.
        delay_ms = max(0.0, 1000 * a.connections / a.rate - 1.0)
        paced, unpaced, health = tmp / "paced.lua", tmp / "unpaced.lua", tmp / "health.lua"
        post = f'wrk.method = "POST"\nwrk.body = {body}\nwrk.headers["Content-Type"] = "application/json"\n'
        paced.write_text(post + f"function delay()\n  return {delay_ms:.3f}\nend\n")
        unpaced.write_text(post)
        health.write_text('wrk.method = "GET"\n')
        print(f"wrk -t2 -c{a.connections}, TLS, a 1-GPU Pod CREATE through every policy; ms")
        s = wrk(base + "/validate", a.seconds, a.connections, paced)
        print(
            f"sustained {a.rate:g} req/s for {a.seconds} s: achieved {s['rps']:.0f} req/s ({s['requests']:,} "
            f"requests), p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms, errors {s['errors']}"
        )
        m = wrk(base + "/validate", a.burst_seconds, a.connections, unpaced)
        print(
            f"the most it sustains (unpaced, {a.burst_seconds} s): {m['rps']:.0f} req/s, p50 {m['p50_ms']:.2f} ms, "
            f"p99 {m['p99_ms']:.2f} ms, errors {m['errors']}"
        )
        h = wrk(base + "/healthz", a.burst_seconds, a.connections, health)
        print(
            f"baseline GET /healthz (unpaced, {a.burst_seconds} s): {h['rps']:.0f} req/s, p50 {h['p50_ms']:.2f} ms, "
            f"p99 {h['p99_ms']:.2f} ms; /validate's maximum is {m['rps'] / h['rps']:.2f}x of it"
        )
        sent = 1 + s["requests"] + m["requests"]
    finally:
        server.terminate()  # SIGTERM: uvicorn stops, the audit flushes what is left
        server.wait(30)
    try:
        from gpuledger.query import Lake

        with Lake(lake) as q:
            audited = q.execute("SELECT count(*) FROM admission_decisions").rows[0][0]
        # wrk counts the responses it read; a few more may have been answered as it stopped.
        print(f"audit: {audited:,} decisions in admission_decisions for the {sent:,} answers wrk counted")
        from gpuledger.spool import default_dir

        left = list(default_dir(str(lake), "webhook-x").parent.glob("*/seg-*.wal"))
        if audited < sent or left:
            print(f"spool segments left: {left}\nserver log:\n{(tmp / 'server.log').read_text()[-3000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
