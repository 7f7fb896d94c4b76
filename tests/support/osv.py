"""The OSV fake every test's hubwatch talks to: one per test process, serving real records on loopback."""

from __future__ import annotations

_OSV: list = []


def osv_endpoint() -> str:
    """The fake's URL, started on first use and stopped when the process exits."""
    if not _OSV:
        import atexit

        from tracker.standins.osv import OsvFake

        _OSV.append(OsvFake().start())
        atexit.register(_OSV[0].stop)
    return _OSV[0].endpoint
