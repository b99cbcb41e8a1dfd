"""Benchmarks: ``.venv/bin/python -m bench`` runs every ``bench/*_bench.py`` module and
writes docs/benchmarks.md. Each figure is a ratio against a baseline measured in the
same run, on the same machine."""
