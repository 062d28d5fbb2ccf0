"""Benchmarks, each run from the checkout as ``python -m bench.<name>`` (docs/performance.md).

``bench.throughput`` is the exchange benchmark (make bench); the other modules reuse its servers.
``settings``, ``urls`` and ``wsgi`` are what the benchmarks' gunicorn serves: the platform plus a
bare Django view; ``probe`` is that WSGI application with each receive and ACK timed (bench.waits).
"""
