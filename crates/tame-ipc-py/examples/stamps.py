"""The stamp messages of crates/tame-ipc/examples/stamp/mod.rs, from Python.

A stamp is four little-endian u64 words (32 B, align 8): ``seq`` (the index of the
attempt, counting those the full ring refused), ``sent_ns`` (CLOCK_MONOTONIC at the
push), ``full`` (attempts refused before this one) and ``check`` (``seq ^ CHECK``).
Between two stamps ``seq`` may skip exactly as many as ``full`` grew: anything else is
a message lost without the producer knowing.
"""

from __future__ import annotations

import time

import numpy as np

STAMP = np.dtype([("seq", "<u8"), ("sent_ns", "<u8"), ("full", "<u8"), ("check", "<u8")], align=True)
CHECK = np.uint64(0x7A3E5EED0BADCAFE)


def monotonic_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Tracker:
    """Checks batches of stamps of one producer (vectorised: no Python loop per message)."""

    def __init__(self) -> None:
        self.received = 0
        self.reported_full = 0
        self.next_seq = 0

    def accept(self, batch: np.ndarray) -> None:
        """Raises AssertionError saying what is wrong with the batch."""
        if len(batch) == 0:
            return
        seq, full = batch["seq"], batch["full"]
        damaged = np.nonzero(batch["check"] != (seq ^ CHECK))[0]
        assert len(damaged) == 0, f"stamp {self.received + damaged[0]} is damaged: {batch[damaged[0]]}"
        expected = np.concatenate(([self.next_seq], seq[:-1] + 1)).astype(np.int64)
        before = np.concatenate(([self.reported_full], full[:-1])).astype(np.int64)
        gaps = seq.astype(np.int64) - expected
        reported = full.astype(np.int64) - before
        bad = np.nonzero((gaps < 0) | (gaps != reported))[0]
        if len(bad):
            i = bad[0]
            raise AssertionError(
                f"{gaps[i]} message(s) missing before seq {seq[i]} but the producer reported {reported[i]} refused"
            )
        self.received += len(batch)
        self.reported_full = int(full[-1])
        self.next_seq = int(seq[-1]) + 1

    @property
    def accounted(self) -> int:
        """Attempts accounted for (received or reported refused)."""
        return self.next_seq


def percentiles(ns: np.ndarray) -> dict[str, float]:
    """p50…p99.9 and max of latencies in ns."""
    if len(ns) == 0:
        return {}
    qs = {"p50": 50, "p90": 90, "p99": 99, "p99.9": 99.9}
    out = {k: float(np.percentile(ns, q)) for k, q in qs.items()}
    out["max"] = float(ns.max())
    return out
