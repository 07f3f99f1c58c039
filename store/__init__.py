"""The store layer: the only code that writes files, and the only place that knows their layout and schema.

``rollscope.store.layout`` holds the directory layout, atomic segment publishing and compaction;
``rollscope.store.schema`` the row schema every writer shares; ``rollscope.store.derived`` the derived tables
the analyses read (declared once there), their on-disk layout, and how they are caught up and published;
``rollscope.store.arrow_memory`` the Arrow memory pool the writers allocate from. Both ``rollscope.collectors``
(which writes) and ``rollscope.queries`` (which reads) import it.
"""
