"""The usable-experience funnel's stages, defined once (docs/metrics.md): what the funnel analysis counts,
the report's keys, the pages' bars and the simulator's ground truth all list them from here.

Each stage after the first has a rate, its count over the stage before's: ``<rate>_rate`` in the funnel
analysis, ``funnel.rates.<rate>`` in the report. dispatched × the four stage rates = usable.
"""

STAGES = ("dispatched", "completed", "scored", "nonzero_signal", "fresh", "usable")
# stage -> the name of its rate (usable's rate is over dispatched: the product of the four before it)
RATES = {
    "completed": "completion",
    "scored": "scoring",
    "nonzero_signal": "nonzero_signal",
    "fresh": "freshness",
    "usable": "usable",
}
STAGE_RATES = ("completion", "scoring", "nonzero_signal", "freshness")  # the four whose product is usable's
