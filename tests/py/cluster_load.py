"""Many kiln serve nodes on one PostgreSQL queue, under load, while nodes are killed with -9 and restarted.

Started by tests/cli/serve_cluster.sh (short run in ctest) and scripts/cluster-load.sh (the issue's 200 clients
for 60 s). Node 0 is never killed: a websocket watcher on it (clientId "watch", the client_id of every job)
sees the events of jobs run on every node (LISTEN/NOTIFY). The other nodes are killed -9 in turn and started
again on a new port. Clients run closed loops: submit a graph through a random live node with a prompt_id of
their own, then poll /history on random live nodes until it is done.

At the end, with every node up and the queue drained, it checks, and prints a JSON summary:
  - store (psql on kiln_jobs): every accepted job (HTTP 200) is there and succeeded; a job whose reply was lost
    to a kill is either absent or succeeded; no job nobody submitted;
  - events: exactly one execution_success per succeeded job on the watcher, none for another id;
  - output files: every file a job's result names exists, no file is named by two jobs, and no file in the
    output folder is unnamed (a run killed before its commit leaves its files in its staging folder only:
    src/server/output_commit.h); staging folders left by kills between a job's end and its cleanup are counted;
  - every node answers /history/{id} for a sample of jobs and has an empty /queue;
  - node 0's resident memory at the end vs after warm-up (reported; must grow by less than --max-rss-growth-mb).
Exit status 0 only when every check passes.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import requests
import websocket


def log(*a):
    print("cluster:", *a, flush=True)


class Node:
    def __init__(self, i, args):
        self.i, self.args = i, args
        self.proc, self.url = None, None
        self.port_file = os.path.join(args.scratch, f"port.{i}")

    def start(self):
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        a = self.args
        logf = open(os.path.join(a.scratch, f"node.{self.i}.log"), "ab")
        self.proc = subprocess.Popen(
            [a.kiln, "serve", "--port", "0", "--port-file", self.port_file, "--models", a.models, "--output", a.out,
             "--user-dir", os.path.join(a.scratch, f"user.{self.i}"), "--queue", a.queue, "--lease", str(a.lease),
             "--batch-images", str(a.batch_images), "--max-queue", "100000"],
            stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.i} exited at start (see node.{self.i}.log)")
            if os.path.exists(self.port_file) and open(self.port_file).read().strip():
                url = f"http://127.0.0.1:{open(self.port_file).read().strip()}"
                try:
                    if requests.get(url + "/health", timeout=2).status_code == 200:
                        self.url = url
                        return
                except requests.RequestException:
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"node {self.i} did not come up")

    def kill9(self):
        self.url = None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.url = None
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def rss_mb(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return 0.0


def graph(src, seed):
    with open(os.path.join(src, "tests/data/graphs/flux2_klein_t2i_template_api.json")) as f:
        g = json.load(f)
    g["75:66"]["inputs"].update(width=64, height=64)
    g["75:62"]["inputs"].update(width=64, height=64, steps=1)
    g["75:73"]["inputs"]["noise_seed"] = seed
    g["9"]["inputs"]["filename_prefix"] = "cluster/c"
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--psql", required=True)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--kill-every", type=float, default=5)
    ap.add_argument("--lease", type=int, default=2)
    ap.add_argument("--batch-images", type=int, default=2)
    ap.add_argument("--max-rss-growth-mb", type=float, default=64)
    ap.add_argument("--drain-wait", type=float, default=40, help="seconds the queue may take to empty after the load")
    ap.add_argument("--report")
    args = ap.parse_args()

    nodes = [Node(i, args) for i in range(args.nodes)]
    for n in nodes:
        n.start()
    log("nodes up:", [n.url for n in nodes])

    events, ev_lock = [], threading.Lock()

    def on_msg(_ws, msg):
        if isinstance(msg, str):
            m = json.loads(msg)
            with ev_lock:
                events.append((m.get("type"), (m.get("data") or {}).get("prompt_id")))

    ws = websocket.WebSocketApp(nodes[0].url.replace("http", "ws") + "/ws?clientId=watch", on_message=on_msg)
    wst = threading.Thread(target=ws.run_forever, daemon=True)
    wst.start()
    time.sleep(0.5)

    accepted, unknown, refused = set(), set(), []
    lock = threading.Lock()
    stop = threading.Event()

    def live():
        return [n.url for n in nodes if n.url]

    def client(k):
        rnd = random.Random(k)
        while not stop.is_set():
            urls = live()
            if not urls:
                time.sleep(0.05)
                continue
            pid = str(uuid.uuid4())
            body = {"prompt": graph(args.src, rnd.randrange(1 << 30)), "client_id": "watch", "prompt_id": pid}
            try:
                r = requests.post(rnd.choice(urls) + "/prompt", json=body, timeout=30)
            except requests.RequestException:
                with lock:
                    unknown.add(pid)
                continue
            if r.status_code != 200:
                with lock:
                    refused.append((r.status_code, r.text[:200]))
                continue
            with lock:
                accepted.add(pid)
            while not stop.is_set():  # closed loop: wait for it through any live node
                urls = live()
                try:
                    if urls and requests.get(rnd.choice(urls) + f"/history/{pid}", timeout=30).json():
                        break
                except (requests.RequestException, ValueError):
                    pass
                time.sleep(0.2)

    kills = 0

    def killer():
        nonlocal kills
        victim = 1
        while not stop.wait(args.kill_every):
            if args.nodes < 2:
                return
            n = nodes[victim]
            n.kill9()
            kills += 1
            log(f"kill -9 node {victim}")
            time.sleep(0.5)
            n.start()
            victim = victim + 1 if victim + 1 < args.nodes else 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(args.clients)]
    t0 = time.time()
    # the killer first: starting 200 client threads on a loaded 2-core machine can take most of the run, and a
    # killer started after them would never get to kill
    kt = threading.Thread(target=killer, daemon=True)
    kt.start()
    for t in threads:
        t.start()
    time.sleep(min(3.0, args.seconds / 4))
    rss_start = nodes[0].rss_mb()
    time.sleep(max(0.0, args.seconds - (time.time() - t0)))
    stop.set()
    kt.join()
    for t in threads:
        t.join(60)
    for n in nodes:
        if not n.url:
            n.start()
    load_s = time.time() - t0
    log(f"load done after {load_s:.1f} s: {len(accepted)} accepted, {len(unknown)} replies lost, {kills} kills")

    def sql(q):
        return subprocess.run([args.psql, "-X", "-q", "-t", "-A", "-F", "\t", args.queue, "-c", q],
                              check=True, capture_output=True, text=True).stdout.splitlines()

    deadline = time.time() + args.drain_wait
    while time.time() < deadline and int(sql("SELECT COUNT(*) FROM kiln_jobs WHERE state IN (0,1)")[0]) > 0:
        time.sleep(0.5)
    time.sleep(1.0)  # the last events on their way through NOTIFY
    rss_end = nodes[0].rss_mb()

    fails = []
    rows = {}
    for line in sql("SELECT id, state, attempts, COALESCE(result, '') FROM kiln_jobs"):
        jid, state, attempts, result = line.split("\t", 3)
        rows[jid] = (int(state), int(attempts), result)
    lost = [j for j in accepted if j not in rows]
    not_ok = [j for j in accepted | unknown if j in rows and rows[j][0] != 2]
    phantom = [j for j in rows if j not in accepted and j not in unknown]
    if lost:
        fails.append(f"{len(lost)} accepted jobs missing from the store")
    if not_ok:
        fails.append(f"{len(not_ok)} jobs not succeeded: {[(j, rows[j][0]) for j in not_ok[:5]]}")
    if phantom:
        fails.append(f"{len(phantom)} jobs in the store nobody submitted")
    done = [j for j in rows if rows[j][0] == 2]
    retried = sum(1 for j in done if rows[j][1] > 1)

    with ev_lock:
        ev = list(events)
    success = {}
    for typ, pid in ev:
        if typ == "execution_success":
            success[pid] = success.get(pid, 0) + 1
    twice = [p for p, c in success.items() if c != 1]
    missing_ev = [j for j in done if j not in success]
    stray_ev = [p for p in success if p not in rows]
    if twice:
        fails.append(f"{len(twice)} jobs with more than one execution_success")
    if missing_ev:
        fails.append(f"{len(missing_ev)} succeeded jobs without execution_success on the watcher")
    if stray_ev:
        fails.append(f"{len(stray_ev)} execution_success events for unknown jobs")

    named = {}
    for j in done:
        for node_out in json.loads(rows[j][2] or "{}").values():
            for img in node_out.get("images", []):
                path = os.path.join(args.out, img["subfolder"], img["filename"])
                named.setdefault(path, []).append(j)
    shared_files = [p for p, js in named.items() if len(js) > 1]
    absent = [p for p in named if not os.path.exists(p)]
    on_disk = set()
    for root, _dirs, files in os.walk(os.path.join(args.out, "cluster")):
        on_disk.update(os.path.join(root, f) for f in files if f.endswith(".png"))
    orphans = len(on_disk - set(named))
    if shared_files:
        fails.append(f"{len(shared_files)} output files named by two jobs")
    if absent:
        fails.append(f"{len(absent)} output files missing: {absent[:3]}")
    if orphans:
        fails.append(f"{orphans} unnamed output files (uncommitted runs' files in the output folder)")
    staging = os.path.join(args.out, ".kiln-staging")
    staging_left = len(os.listdir(staging)) if os.path.isdir(staging) else 0

    sample = random.Random(1).sample(done, min(10, len(done)))
    for n in nodes:
        q = requests.get(n.url + "/queue", timeout=30).json()
        if q["queue_running"] or q["queue_pending"]:
            fails.append(f"node {n.i} /queue not empty")
        for j in sample:
            h = requests.get(n.url + f"/history/{j}", timeout=30).json()
            if h.get(j, {}).get("status", {}).get("status_str") != "success":
                fails.append(f"node {n.i} /history/{j} is not success")
                break
    growth = rss_end - rss_start
    if growth > args.max_rss_growth_mb:
        fails.append(f"node 0 resident memory grew {growth:.0f} MB")

    ws.close()
    for n in nodes:
        n.stop()
    summary = {"nodes": args.nodes, "clients": args.clients, "seconds": round(load_s, 1), "kills": kills,
               "accepted": len(accepted), "replies_lost": len(unknown), "lost_reply_jobs_in_store":
               len([j for j in unknown if j in rows]), "refused": len(refused), "succeeded": len(done),
               "reclaimed_after_kill": retried, "execution_success_events": sum(success.values()),
               "output_files_named": len(named), "output_files_unnamed": orphans,
               "staging_folders_left": staging_left,
               "jobs_per_s": round(len(done) / load_s, 2), "node0_rss_mb": [round(rss_start, 1), round(rss_end, 1)],
               "failures": fails}
    print(json.dumps(summary, indent=1))
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=1)
    if not accepted:
        print("cluster: FAIL no job was accepted")
        return 1
    for f in fails:
        print("cluster: FAIL", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
