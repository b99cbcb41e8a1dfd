"""The stack config: one typed, immutable object, loaded and validated once.

It sits above the components and the edge (only the program, the local twin, the
review tools and the benchmarks import it), split by concern:

- ``keys``: every key the project reads (type, default, description);
- ``model``: the typed records a valid stack becomes;
- ``checks``: raw values to a ``StackConfig``, or every problem at once;
- ``loading``: from ``pulumi.Config`` or from ``Pulumi.<stack>.yaml``;
- ``reference`` and ``project_file``: the configuration reference in
  docs/architecture.md and ``Pulumi.yaml``'s ``config:`` block, rendered from ``keys``.
"""
