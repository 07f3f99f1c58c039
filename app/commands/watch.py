"""`rollscope watch`: the check rules on a live run every interval, one alert per change to a webhook."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rollscope.app.commands._common import add_run, add_store, number
from rollscope.app.commands.check import add_rule_options

CLOSE_TIMEOUT_S = 30.0  # how long a stopping watch still tries to deliver what it recorded


def register(sub) -> None:
    p = sub.add_parser(
        "watch",
        help="run the checks on a live run every interval and post each PASS/FAIL change to a webhook",
        description="Watch a run: every --interval seconds, run every `rollscope check` rule; print each rule "
        "that goes from PASS to FAIL or back, and POST it as JSON to the webhook (Slack's incoming webhooks "
        "and any JSON receiver). What it saw is kept in the store, so a restarted watch sends nothing twice. "
        "The webhook is --notify, else $ROLLSCOPE_NOTIFY_URL; $ROLLSCOPE_NOTIFY_TOKEN, when set, is sent as "
        "'Authorization: Bearer'. Ctrl-C stops it.",
    )
    add_store(p)
    add_run(p)
    p.add_argument(
        "--notify",
        metavar="URL",
        help="webhook to POST alerts to (default $ROLLSCOPE_NOTIFY_URL, which keeps a secret URL out of `ps`; "
        "neither: alerts are printed and recorded only)",
    )
    p.add_argument(
        "--interval",
        type=number(0, above=True),
        default=60.0,
        metavar="SECONDS",
        help="seconds between two rounds of checks (default 60)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="one round, then deliver and exit (status 1 when a rule fails): for cron",
    )
    add_rule_options(p, now="wall")
    p.add_argument(
        "--dashboard",
        metavar="URL",
        help="the dashboard's address (e.g. http://host:8501): each alert links to its page there",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.app.alerts import Watch
    from rollscope.settings import Settings
    from rollscope.store import alerts as store_alerts

    settings = Settings.resolve()
    url = _url(args.notify or settings.notify_url)
    store = _store(args)
    with store_alerts.watching(store, args.run):
        watch = Watch(store, args.run, args.dashboard, webhook=url is not None)
        hook = _webhook(url, settings.notify_token, watch)
        for event in watch.pending() if hook else ():  # recorded by an earlier watch, not confirmed: now
            hook.post(event["id"], watch.payload(event))
        try:
            failing = _rounds(args, watch, hook)
        except KeyboardInterrupt:
            failing = None
        finally:
            left = hook.close(CLOSE_TIMEOUT_S) if hook else 0
            if left:
                print(
                    f"rollscope: {left} alerts not delivered yet; the next watch sends them", file=sys.stderr
                )
    return 1 if args.once and failing else 0


def _rounds(args, watch, hook) -> bool:
    """Check rounds until interrupted (one with --once); whether a rule failed in the last. One reader for
    them all: each round takes in only the segments published since the one before."""
    from rollscope.queries.reader import Reader

    reader = Reader(watch.store, run_id=args.run)
    while True:
        started = time.monotonic()
        failing = _round(args, reader, watch, hook)
        if args.once:
            return failing
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))


def _round(args, reader, watch, hook) -> bool:
    from rollscope.app.alerts import Verdict, stamp
    from rollscope.errors import RollscopeError, UnknownRunError
    from rollscope.queries.checks import run_checks

    try:
        reader.refresh()  # the segments published since the last round (nothing new: one listing)
        now_ns = time.time_ns() if args.now == "wall" else None
        results = reader.retrying(lambda: run_checks(reader.con, args.run, dict(args.threshold), now_ns))
    except UnknownRunError:
        print(f"rollscope: waiting for run {args.run!r} to write its first spans", file=sys.stderr)
        return False
    except RollscopeError as e:  # a round that could not read the run (a store being rewritten): the next may
        if args.once:
            raise
        print(f"rollscope: {e.title}: {e}; trying again in {args.interval:g} s", file=sys.stderr)
        return False
    verdicts = [Verdict(r.name, r.ok, r.message, r.value, r.threshold, r.unit, r.step) for r in results]
    for event in watch.observe(verdicts):
        print(f"{stamp(event)} {event['state']} {event['rule']}: {event['message']}", flush=True)
        if hook:
            hook.post(event["id"], watch.payload(event))
    return not all(r.ok for r in results)


def _store(args) -> Path:
    """The store to watch: one a job has not created yet is waited for (the watch may start first)."""
    from rollscope.errors import StoreError
    from rollscope.settings import default_store

    store = Path(args.store) if args.store else default_store()
    if store.exists() and not store.is_dir():
        raise StoreError("Not a store", f"{store} is a file, not a rollscope store directory")
    return store


def _url(url: str | None) -> str | None:
    """The webhook as given, checked as the settings check $ROLLSCOPE_NOTIFY_URL (a bad --notify is an error,
    which does not repeat the URL: a webhook's address may hold its secret)."""
    if url is None:
        return None
    from rollscope.settings import Settings

    try:
        return Settings.resolve(notify_url=url).notify_url
    except ValueError as e:
        from rollscope.errors import RollscopeError

        # the URL check's own words (Settings prefixes them with the field's name, which is no option here)
        raise RollscopeError("Bad webhook", f"--notify: {e.__cause__ or e}") from None


def _webhook(url: str | None, token: str | None, watch):
    if url is None:
        return None
    from rollscope.app.notify import Webhook

    return Webhook(url, token, watch.done)
