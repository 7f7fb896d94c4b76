"""The one exception the estimator raises: bad input, named by the key that is wrong."""


class EstimateError(ValueError):
    """A config or manifest the estimator cannot read; ``key`` names the offending key or tensor."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
