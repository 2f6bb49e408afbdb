"""Python against a real-time producer (and consumer) in another process.

The Rust side is crates/tame-ipc/examples/stamp_{producer,consumer}.rs; the stamps
(stamps.py) let every message be checked: in order, intact, and missing only where the
producer said the ring was full.
"""

from __future__ import annotations

import signal
import time

import numpy as np

import tame_ipc
from conftest import EXAMPLES, PYTHON
from stamps import STAMP, Tracker, monotonic_ns, percentiles


def parse(line: str) -> dict:
    words = line.split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}


def consume(rx, count: int, timeout: float = 30):
    """Pops stamps into a numpy batch until `count` attempts are accounted for."""
    batch = np.zeros(64, dtype=STAMP)
    tracker, latencies = Tracker(), []
    deadline = time.monotonic() + timeout
    while tracker.accounted < count:
        assert time.monotonic() < deadline, f"timed out with {tracker.received} received"
        n = rx.pop_into(batch)
        if n == 0:
            time.sleep(0.0002)
            continue
        now = monotonic_ns()
        latencies.append(now - batch["sent_ns"][:n].astype(np.int64))
        tracker.accept(batch[:n])
    return tracker, np.concatenate(latencies)


def test_rust_producer_to_python_consumer_checks_every_message(shm, rust_examples, children):
    ring = tame_ipc.Ring.create(shm(), STAMP.itemsize, 1024, elem_align=STAMP.alignment)
    rx = ring.consumer()
    producer = children(
        [rust_examples / "stamp_producer", "--name", ring.name, "--count", 2000, "--period-us", 500, "--wait-consumer"]
    )
    producer.expect("READY")
    sent_line = None
    tracker, latencies = consume(rx, 2000)
    assert producer.finish() == 0
    sent_line = next(line for line in producer.lines if line.startswith("sent "))
    report = parse(sent_line)
    assert report["sent"] + report["full"] == 2000
    assert tracker.received == report["sent"], "every message pushed arrived"
    assert (latencies > 0).all(), "sent before received, on one clock"
    print("Rust producer → Python consumer, one-way ns:", percentiles(latencies))


def test_a_ring_passed_by_descriptor_reaches_the_rust_producer(rust_examples, children):
    ring = tame_ipc.Ring.create_anonymous(STAMP.itemsize, 256, elem_align=STAMP.alignment)
    rx = ring.consumer()
    fd = ring.fileno()
    producer = children(
        [rust_examples / "stamp_producer", "--fd", fd, "--capacity", 256, "--count", 300, "--period-us", 200],
        pass_fds=(fd,),
    )
    tracker, _ = consume(rx, 300)
    assert producer.finish() == 0
    assert tracker.received == parse(producer.lines[-1])["sent"]


def test_the_producer_never_waits_on_a_stopped_python_consumer(shm, rust_examples, children):
    ring = tame_ipc.Ring.create(shm(), STAMP.itemsize, 64, elem_align=STAMP.alignment)
    consumer = children(
        [PYTHON, EXAMPLES / "stamp_consumer.py", "--name", ring.name, "--capacity", 64, "--count", 1500,
         "--sleep-us", 100]
    )
    consumer.expect("READY")
    producer = children(
        [rust_examples / "stamp_producer", "--name", ring.name, "--capacity", 64, "--count", 1500,
         "--period-us", 1000, "--wait-consumer"]
    )
    producer.expect("READY")
    time.sleep(0.2)
    consumer.proc.send_signal(signal.SIGSTOP)
    # 1.5 s of periods: the producer must get through them while the consumer stays stopped.
    assert producer.finish(timeout=30) == 0
    assert consumer.state() == "T", "the consumer was stopped all along"
    report = parse(next(line for line in producer.lines if line.startswith("sent ")))
    assert report["full"] > 0, "a stopped consumer shows up as a full ring"
    assert report["sent"] + report["full"] == 1500
    print("producer while the consumer was stopped:", report)
    consumer.proc.send_signal(signal.SIGCONT)
    assert consumer.finish(timeout=30) == 0, consumer.lines
    received = parse(next(line for line in consumer.lines if line.startswith("received ")))
    assert received["received"] == report["sent"], "nothing lost but what the producer reported"


def test_a_killed_python_producer_is_seen_dead_by_the_rust_consumer(shm, rust_examples, children):
    ring = tame_ipc.Ring.create(shm(), STAMP.itemsize, 256, elem_align=STAMP.alignment)
    consumer = children(
        [rust_examples / "stamp_consumer", "--name", ring.name, "--capacity", 256, "--until-dead", "--sleep-us", 200]
    )
    consumer.expect("READY")
    producer = children([PYTHON, EXAMPLES / "stamp_producer.py", "--name", ring.name, "--capacity", 256,
                         "--period-us", 500])
    producer.expect("sent 300")
    producer.proc.send_signal(signal.SIGKILL)
    producer.proc.wait()
    assert consumer.finish(timeout=30) == 0, consumer.lines
    assert f"producer {producer.pid} dead" in consumer.lines, consumer.lines
    summary = parse(next(line for line in consumer.lines if line.startswith("received ")).rsplit(" producer", 1)[0])
    assert summary["received"] >= 300, "it consumed up to the kill, checking every stamp"
    # The ring is free for a new producer: the dead one's role is taken over.
    assert tame_ipc.Ring.open(ring.name, STAMP.itemsize, 256).producer() is not None
