"""Development code: what tests, the offline review, the local topology and the
benchmarks share (the mock program runner, the loopback key set, the shipped edge code
under mocks with its QuickJS runner and event builders, the edge test cases, the njs and
Node.js runners).

Product code never imports it: ``components/``, ``functions/`` and ``edge/`` stay free
of it (``tests/test_layering.py`` walks every import), and ``bench/`` takes what
it needs from here, never from ``tests/``.
"""
