"""The official ``hindsight-client`` 1.1.0 pointed at our live server (one fixture for every file)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hindsight_client import Hindsight


@pytest.fixture
def client(live_server) -> Iterator[Hindsight]:  # type: ignore[no-untyped-def]
    hindsight = Hindsight(base_url=live_server.url, timeout=30.0, max_attempts=1)
    yield hindsight
    hindsight.close()
