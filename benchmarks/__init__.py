"""Benchmarks (not run by `make test`): `make bench` or `python -m benchmarks.run --help`."""
