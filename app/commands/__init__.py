"""One module per `rollscope` subcommand, each with ``register(subparsers)`` setting ``func`` on its parser.

Modules import heavy libraries inside their handler, so `rollscope --help` stays fast.
"""

# Order is the order of `rollscope --help`.
COMMANDS = (
    "dashboard",
    "simulate",
    "collect",
    "import_",
    "report",
    "check",
    "runs",
    "sql",
    "views",
    "compact",
    "rm",
)
