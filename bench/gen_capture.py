#!/usr/bin/env python3
"""Generate a benchmark capture of real Kafka traffic on loopback.

Several confluent-kafka producers, each with its own in-process librdkafka mock cluster
(`test.mock.num.brokers`), produce keyed records with headers while tcpdump captures the
loopback interface. Needs root, tcpdump and confluent-kafka.

    python3 bench/gen_capture.py OUT.pcap [--producers 6] [--messages 60000] [--codec none]
                                 [--workload batched|message-heavy]

Workloads: `batched` (the default) lets librdkafka batch up to 50 records per request;
`message-heavy` sends every record in its own Produce request (linger 0, one record a batch),
so the capture holds many small request/response pairs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

BATCHING = {"batched": {"linger.ms": 2, "batch.num.messages": 50},
            "message-heavy": {"linger.ms": 0, "batch.num.messages": 1, "max.in.flight": 1}}


def produce(n: int, codec: str, seed: int, workload: str) -> None:
    from confluent_kafka import Producer

    p = Producer({
        "test.mock.num.brokers": 3,
        "client.id": f"bench-{seed}",
        "compression.codec": codec,
        "acks": "all",
        **BATCHING[workload],
    })
    for i in range(n):
        value = (f"value-{seed}-{i}-" + "x" * (50 + (i * 37) % 400)).encode()
        while True:
            try:
                p.produce(f"bench-topic-{i % 4}", value=value, key=f"key-{i % 1000}".encode(),
                          headers=[("trace", str(i).encode())])
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--producers", type=int, default=6)
    ap.add_argument("--messages", type=int, default=60000, help="per producer")
    ap.add_argument("--codec", default="none")
    ap.add_argument("--workload", choices=sorted(BATCHING), default="batched")
    a = ap.parse_args()
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-U", "-n", "-B", "262144",
                             "-w", a.out, "tcp"], stderr=subprocess.PIPE)
    time.sleep(1.0)
    try:
        for seed in range(a.producers):
            produce(a.messages, a.codec, seed, a.workload)
    finally:
        time.sleep(1.0)
        dump.send_signal(signal.SIGINT)
        _, err = dump.communicate(timeout=30)
    sys.stderr.write(err.decode(errors="replace"))
    print(f"{a.out}: {os.path.getsize(a.out) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
