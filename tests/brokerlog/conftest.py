import pytest


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0.12 loads its protocol schemas with deprecated importlib.resources calls.
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")
