"""A scripted answer to retain's fact extraction that counts the calls in flight."""

from __future__ import annotations

import threading
import time
from typing import Any

from fakes.llm_server import Reply


class InFlight:
    """A responder that answers each extraction with the item's own text after ``seconds``,
    recording how many calls were in flight at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.seconds)
        finally:
            with self._lock:
                self.now -= 1
        text = body["messages"][-1]["content"]
        return Reply.json({"facts": [{"text": f"fact of {text}", "fact_type": "world",
                                      "occurred_start": None, "occurred_end": None}]})
