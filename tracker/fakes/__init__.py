"""Servers that stand in for the outside world on loopback: the OSV fake and the base both fakes share.

The tests, the benchmarks and `hubwatch demo` use them; the daemon never does.
"""
