"""`rollscope dashboard`: the browser dashboard, ``streamlit run app/dashboard.py`` on 127.0.0.1."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rollscope.app.commands._common import add_store, port_number

APP = Path(__file__).resolve().parent.parent / "dashboard.py"
DEFAULT_PORT = 8501


def register(sub) -> None:
    p = sub.add_parser(
        "dashboard",
        help="open the browser dashboard on 127.0.0.1 (live while the run writes)",
        description="Serve the dashboard (Streamlit) on http://127.0.0.1:PORT. Pages refresh by themselves "
        "while a run writes into the store.",
    )
    add_store(p, default="$ROLLSCOPE_STORE, else the shipped sample_data/ with its sample run")
    p.add_argument(
        "--port",
        type=port_number(1),
        default=DEFAULT_PORT,
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT})",
    )
    p.set_defaults(func=run)


def streamlit_command(store: Path | None, port: int) -> list[str]:
    """Headless, local only, no usage statistics, no browser opened, no file watching."""
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--theme.base",
        "light",
    ]
    return command + (["--", "--store", str(store)] if store is not None else [])


def chosen_store(args) -> Path | None:
    """--store, else $ROLLSCOPE_STORE, else None: the app opens the shipped sample_data/."""
    from rollscope.settings import env_store

    given = args.store or env_store()
    return Path(given).resolve() if given else None


def run(args) -> int:
    from rollscope.errors import StoreError

    store = chosen_store(args)
    if store is not None and store.exists() and not store.is_dir():
        raise StoreError("Not a store", f"{store} is a file, not a rollscope store directory")
    _require_free(args.port)
    where = store or "the shipped sample_data/"
    print(
        f"rollscope dashboard: http://127.0.0.1:{args.port}  (store {where}; pid {os.getpid()}; Ctrl-C stops it)",
        file=sys.stderr,
    )
    command = streamlit_command(store, args.port)
    os.execv(command[0], command)  # the server replaces this process: one pid, signals go straight to it


def _require_free(port: int) -> None:
    """Refuse a port another server holds before saying where the dashboard is: Streamlit would only log "Port
    N is not available" after our line had printed the address of someone else's server."""
    from rollscope.collectors.ports import taken
    from rollscope.errors import RollscopeError

    why = taken("127.0.0.1", port)
    if why is not None:
        raise RollscopeError(
            "Port in use", f"cannot serve on 127.0.0.1:{port}: {why}; choose another with --port"
        )
