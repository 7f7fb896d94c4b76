"""What storage raises. Every surface (CLI exit codes, HTTP statuses) maps these classes once.

`StorageError`: the database cannot be opened, migrated or written. `StoreLookupError` and its
subclasses: what a caller asked for names nothing the store can act on (not stored, ambiguous,
already there, switched off); the message says which, in words a person can act on.
`InvalidSubscription`: a webhook subscription's settings are refused (a `ValueError`).
"""

from __future__ import annotations


class StorageError(Exception):
    """The database cannot be opened, migrated or written."""


class StoreLookupError(Exception):
    """What was asked for names nothing the store can act on."""


class NotStored(StoreLookupError, LookupError):
    """Nothing stored matches."""


class RevisionNotStored(NotStored):
    """No stored revision matches what was asked for."""


class DeliveryNotFound(NotStored):
    """No delivery has that id."""


class AmbiguousRevision(StoreLookupError):
    """A short sha matches more than one stored revision."""


class WatchExists(StoreLookupError):
    """The repo branch is already watched."""


class SubscriptionDisabled(StoreLookupError):
    """The subscription is switched off (removed, or disabled after permanent failures)."""


class InvalidSubscription(ValueError):
    """A subscription's URL, format, filters or secret is not acceptable; the message says which."""
