"""The store layer: the only code that writes files, and the only place that knows their layout and schema.

``rollscope.store.layout`` holds the directory layout, atomic segment publishing and compaction;
``rollscope.store.schema`` the row schema every writer shares. Both ``rollscope.collectors`` (which writes)
and ``rollscope.queries`` (which reads) import it.
"""
