"""The adapters' own thread: span work noted on the training thread, built and exported beside it.

An adapter (TRL, verl) notes on the training thread only what it must copy there (times, references to the
framework's token lists, a reward tensor's values) and queues the span work; that work reaches a thread of its
own in batches, as often as the store exporter publishes a segment or once enough completions wait, and is
drained when training ends, on ``close()`` and at interpreter exit. Why batches, and the costs measured on the
TRL adapter: ``rollscope.integrations.trl`` (``HANDOFF_SECONDS``, ``HANDOFF_COMPLETIONS``).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections import Counter


class Handover:
    """Span work handed from the training thread to the adapter's thread, and the adapter's accounting.

    ``stats``: spans emitted per kind, failures per hook, seconds the adapter's bookkeeping took on the
    training thread (wall, and CPU), CPU seconds its span thread took, and the store exporter's counters.
    A subclass names itself (``label``, ``thread_name``) and says how many completions may wait
    (``_handoff_completions``)."""

    label = "rollscope"
    thread_name = "rollscope-adapter"
    _handoff_completions = 2048
    _log = logging.getLogger("rollscope.integrations")

    def __init__(self, rl, out, handoff_seconds: float = 2.0):
        self.rl = rl
        self._out = out
        self.counts: Counter = Counter()
        self.failures: Counter = Counter()
        self.seconds = 0.0  # spent in the adapter's own bookkeeping, on the training thread
        self.cpu_seconds = 0.0  # the same, in CPU time of the training thread
        self.emit_seconds = 0.0  # CPU time spent building spans, on the adapter's own thread
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._pending: list = []  # span work not yet handed to the adapter's thread
        self._pending_load = 0  # completions the pending work carries (1 for an item without any)
        self._handed_at: float | None = None  # the last hand-over, or the first item (the interval's start)
        self._handed = 0  # batches of span work handed to the adapter's thread ...
        self._built = 0  # ... and those it has finished (their spans with the processor)
        self._handoff_seconds = float(getattr(rl.exporter, "segment_seconds", handoff_seconds))
        self._warned: set[str] = set()
        self._closed = False

    def close(self) -> None:
        """Build what is pending, end the adapter's thread and flush the store exporter (training keeps going
        if any of it fails)."""
        if self._closed:
            return
        self._closed = True
        hook = getattr(self, "_exit_hook", None)
        if hook is not None:
            atexit.unregister(hook)
        self._guard("close", self._drain)
        self._guard("close", self._stop_worker)
        self._guard("close", self.rl.force_flush)

    @property
    def stats(self) -> dict:
        return {
            "spans": dict(self.counts),
            "failures": dict(self.failures),
            "adapter_s": self.seconds,
            "adapter_cpu_s": self.cpu_seconds,
            "emit_cpu_s": self.emit_seconds,
            "export_cpu_s": self.rl.processor.thread_cpu_s,
            "exporter": self.rl.stats,
        }

    def _guard(self, hook: str, fn, *args):
        """Run our own bookkeeping; a failure is logged (once per hook), counted, and never raised."""
        started, cpu = time.perf_counter(), time.thread_time_ns()  # _ns: half the cost of thread_time()
        try:
            return fn(*args)
        except Exception:
            self._failed(hook)
            return None
        finally:
            if threading.current_thread() is self._worker:
                self.emit_seconds += (time.thread_time_ns() - cpu) / 1e9
            else:
                self.seconds += time.perf_counter() - started
                self.cpu_seconds += (time.thread_time_ns() - cpu) / 1e9

    def _hook(self, hook: str, fn, *args):
        """``_guard`` for the hooks training calls every step, timed by the wall clock alone.

        Why: each of these hooks runs right after a burst of training's torch work, and there a read of the
        thread's CPU clock (a system call, ``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``) and ``current_thread()``
        cost ~15 us together, measured on the tiny CPU run, against ~3 us for the hook itself: ten hooks a step
        paid ~0.12 ms a step for their own accounting. They never wait on anything (no lock, I/O or other
        thread), so their wall time is their CPU time: it is counted as both."""
        started = time.perf_counter()
        try:
            result = fn(*args)
        except Exception:
            self._failed(hook)
            result = None
        elapsed = time.perf_counter() - started
        self.seconds += elapsed
        self.cpu_seconds += elapsed
        return result

    def _failed(self, hook: str) -> None:
        self.failures[hook] += 1
        if hook not in self._warned:
            self._warned.add(hook)
            self._log.warning(
                "rollscope: the %s adapter's %s hook failed; training goes on",
                self.label,
                hook,
                exc_info=True,
            )

    # --- the adapter's own thread: spans are built there, off the training thread ----------------------------

    def _submit(self, hook: str, fn, *args, completions: int = 1) -> None:
        """Queue span work for the adapter's thread, handed over in batches (``_handoff``): once
        ``segment_seconds`` have passed since the last hand-over (the first: since the first item; in a run of
        long steps, an item coming after a pause is handed over at once), or ``_handoff_completions`` wait."""
        now = time.monotonic()
        if self._handed_at is None:
            self._handed_at = now
        self._pending.append((hook, fn, args))
        self._pending_load += completions
        if self._pending_load >= self._handoff_completions or now - self._handed_at >= self._handoff_seconds:
            self._handoff()

    def _take_pending(self) -> list:
        """The span work pending, which from now on is handed over (the hand-over interval restarts)."""
        items, self._pending, self._pending_load = self._pending, [], 0
        self._handed_at = time.monotonic()
        return items

    def _handoff(self) -> None:
        """Give the adapter's thread everything pending, in one queue operation (one wake-up)."""
        items = self._take_pending()
        if not items:
            return
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name=self.thread_name, daemon=True)
            self._worker.start()
        self._handed += 1
        self._queue.put(items)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:  # closed: the thread ends, and with it its hold on this handle and the trainer
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            self._guard("flush", self._build, item)  # its CPU counted once, as the adapter thread's
            self._built += 1

    def _drain(self, timeout: float = 60.0) -> None:
        """Hand over what is pending and wait until every span handed to the adapter's thread is built. If that
        thread never started (training that never filled a hand-over: shorter than the interval, with fewer
        completions than the bound), the spans are built here instead: the caller waits for them either way,
        and starting a thread for them would cost it more (a thread start and two GIL hand-overs)."""
        if self._worker is None:
            self._build(self._take_pending())
            return
        self._handoff()
        if self._worker is None or self._built == self._handed:
            return  # every batch handed over is built and with the processor: no round trip to the thread
        done = threading.Event()
        self._queue.put(done)
        if not done.wait(timeout):
            raise TimeoutError(f"the adapter's thread did not finish in {timeout:.0f} s")

    def _build(self, items: list) -> None:
        """Span work, then its spans to the processor in one call; each failure handled as ``_guard`` handles
        it. Runs on the adapter's thread, or on the caller's in ``_drain``; the caller's guard times the whole."""
        for hook, fn, args in [*items, ("flush", self._out.flush, ())]:
            try:
                fn(*args)
            except Exception:
                self._failed(hook)

    def _stop_worker(self, timeout: float = 10.0) -> None:
        """End the adapter's thread (drained first). A thread left waiting on its queue would keep this handle,
        and through it the trainer (model, optimizer, dataset), alive until the process exits: in a process
        that builds several trainers each would stay, and every full garbage collection would scan them. Work
        handed over later (training resumed after ``close()``) starts a new thread."""
        worker, self._worker = self._worker, None
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout)


def installed(cls, trainer, store, run_id, attach_kwargs: dict):
    """``attach()``, then the adapter ``cls``'s handle on ``trainer``, installed and closed at exit. Its spans go
    as store columns when the provider is attach()'s own (``_Columns``), else through the SDK."""
    from rollscope.collectors.attaching import attach
    from rollscope.integrations.trl_spans import _Columns, _private_provider, _SDKSpans

    rl = attach(store=store, run_id=run_id, **attach_kwargs)
    inst = cls(trainer, rl, _Columns(rl) if _private_provider(rl) else _SDKSpans(rl))
    inst.install()
    trainer._rollscope_instrumentation = inst
    close_at_exit(inst)
    return inst


def close_at_exit(inst) -> None:
    """Close ``inst`` at interpreter exit if nothing did before (training interrupted, no ``close()``): its
    pending spans are built and handed to the processor. Registered after attach() registered the provider's
    shutdown, so it runs first (atexit is last in, first out). Holds the handle weakly: a trainer the job drops
    is not kept alive until exit."""
    ref = weakref.ref(inst)

    def close() -> None:
        live = ref()
        if live is not None:
            live.close()

    inst._exit_hook = close
    atexit.register(close)
