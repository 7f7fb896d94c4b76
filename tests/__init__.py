"""hubwatch's tests: a package, so that `tests.support` is imported under one name and the root conftest once
(the repo root is on sys.path through pyproject's pythonpath). tests/estimator stays a plain folder of test
modules, so that its helpers import by their own names and nothing there shadows the estimator package."""
