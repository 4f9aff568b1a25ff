#!/usr/bin/python3
"""A stand-in for a TensorFlow program, for the real TensorFlowTrainingJob runs of the
end-to-end tests (TensorFlow cannot be installed on the test machine).

It reads TF_CONFIG as TensorFlow does, listens on its own task's address from `cluster` (an
evaluator has none: it is outside the cluster), and connects to every other task of
`cluster` by the address given there, retrying while they start, until each answers with
its task name. The chief (or worker 0 when there is no chief) then exits 0 if all answered;
the other tasks keep answering until they are stopped, as a ps does.

With HOLD_FIRST_RUN=<dir>, the task's first run only prints "first run" and waits (a test
kills it then); later runs check the cluster.
"""
import json
import os
import socket
import sys
import threading
import time

config = json.loads(os.environ["TF_CONFIG"])
cluster, task = config["cluster"], config["task"]
me = f"{task['type']}:{task['index']}"

hold = os.environ.get("HOLD_FIRST_RUN")
if hold:
    marker = os.path.join(hold, me.replace(":", "-"))
    if not os.path.exists(marker):
        open(marker, "w").close()
        print(f"{me}: first run, waiting", flush=True)
        time.sleep(600)


def serve(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(me.encode())


if task["type"] in cluster:
    own = cluster[task["type"]][task["index"]]
    threading.Thread(target=serve, args=(int(own.rsplit(":", 1)[1]),), daemon=True).start()
    print(f"{me}: listening at {own}", flush=True)

answered = 0
peers = [(t, i, a) for t, addrs in sorted(cluster.items()) for i, a in enumerate(addrs) if f"{t}:{i}" != me]
for t, i, addr in peers:
    host, port = addr.rsplit(":", 1)
    deadline = time.time() + 120
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as c:
                reply = c.recv(64).decode()
            if reply:
                break
            # Connected as the task was going away (a replica restarted): not an answer yet.
            raise ConnectionResetError("closed without answering")
        except OSError as e:
            if time.time() > deadline:
                print(f"{me}: {addr} did not answer: {e}", flush=True)
                sys.exit(1)
            time.sleep(0.2)
    ok = reply == f"{t}:{i}"
    answered += ok
    print(f"{me}: {addr} answered {reply!r}", flush=True)

print(f"{me}: {answered} of {len(peers)} tasks answered", flush=True)
main = "chief:0" if "chief" in cluster else "worker:0"
if me == main or answered != len(peers):
    sys.exit(0 if answered == len(peers) else 1)
while True:  # keep answering, as a ps does, until stopped
    time.sleep(3600)
