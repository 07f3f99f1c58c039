"""What an acknowledgement is worth: `kill -9` under load loses no acknowledged span, and an overloaded receiver
keeps its memory bounded and tells clients to retry, after which nothing is missing."""

from __future__ import annotations

import http.client
import threading
import time

import pytest

from rollscope import queries
from tests.fixtures.receiver import (
    PROTOBUF,
    collect_process,
    finished_spans,
    get,
    peak_rss_mib,
    protobuf_body,
    span_ids,
)


def _stored_span_ids(store) -> list[int]:
    return [row[0] for row in queries.connect(store).execute("SELECT span_id FROM spans").fetchall()]


@pytest.mark.long  # kill -9 under load
def test_kill_9_during_load_loses_no_acknowledged_span(store):
    batches = [finished_spans(20, seed=seed) for seed in range(200)]
    sent, acknowledged = set(), set()
    lock = threading.Lock()

    def client(mine: list) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        for spans in mine:
            with lock:
                sent.update(span_ids(spans))
            try:
                conn.request("POST", "/v1/traces", protobuf_body(spans), {"Content-Type": PROTOBUF})
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                return  # the receiver is gone: this batch was never acknowledged
            if response.status == 200:
                with lock:
                    acknowledged.update(span_ids(spans))

    with collect_process(store) as (proc, url):
        host, port = url.removeprefix("http://").split(":")
        threads = [threading.Thread(target=client, args=(batches[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        while len(acknowledged) < 600:
            time.sleep(0.005)
        proc.kill()  # SIGKILL, mid-load
        for t in threads:
            t.join()
    assert 600 <= len(acknowledged) < len(sent) <= 4000  # killed with requests still in flight

    with collect_process(store) as (_, url):  # a restarted receiver serves the same store
        assert get(url, "/health").status == 200
    stored = _stored_span_ids(store)
    assert acknowledged <= set(stored) <= sent
    assert len(stored) == len(set(stored))


@pytest.mark.long  # overload by design
def test_overload_bounds_memory_and_clients_that_retry_lose_nothing(store):
    bodies = [protobuf_body(finished_spans(1500, seed=seed)) for seed in range(4)]  # ~0.3 MiB each
    refusals, accepted = [], []

    def client(k: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        for i in range(4):
            body = bodies[(k + i) % len(bodies)]
            while True:
                conn.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
                response = conn.getresponse()
                response.read()
                if response.status not in (429, 503):
                    break
                refusals.append(response.getheader("Retry-After"))
                time.sleep(float(response.getheader("Retry-After")))
            accepted.append(response.status)

    with collect_process(store, "--max-pending-mib", "1", "--max-request-mib", "0.5") as (proc, url):
        host, port = url.removeprefix("http://").split(":")
        get(url, "/health")
        baseline = peak_rss_mib(proc.pid)
        threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        growth = peak_rss_mib(proc.pid) - baseline
        health = get(url, "/health").json()

    assert accepted == [200] * 48
    assert refusals and set(refusals) == {"1"}
    assert health["requests"]["429"] == len(refusals) and health["pending_bytes"] == 0
    assert growth < 120, f"peak memory grew {growth:.0f} MiB with a 1 MiB budget"
    stored = _stored_span_ids(store)
    assert len(stored) == 48 * 1500 and len(set(stored)) == 4 * 1500
