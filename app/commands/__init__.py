"""One module per `rollscope` subcommand, each with ``register(subparsers)`` setting ``func`` on its parser.

Modules import heavy libraries inside their handler, so `rollscope --help` stays fast.
"""

from rollscope.app.commands import (
    advise,
    check,
    collect,
    compact,
    dashboard,
    derive,
    import_,
    report,
    rm,
    runs,
    show,
    simulate,
    sql,
    views,
    watch,
)

# Order is the order of `rollscope --help`; a new command is a module here and one entry below.
COMMANDS = (
    dashboard,
    simulate,
    collect,
    import_,
    report,
    check,
    watch,
    advise,
    show,
    runs,
    sql,
    views,
    derive,
    compact,
    rm,
)
