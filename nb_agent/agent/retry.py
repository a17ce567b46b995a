"""Retrying model calls: exponential backoff with jitter for transient failures, nothing else.

Timeouts, 429 (honouring ``Retry-After``), 5xx, overloaded and dropped streams are retried, but
only while the failed attempt has shown the user nothing: output already streamed cannot be
taken back, so such a failure ends the run with the partial answer kept.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    initial: float = 1.0
    maximum: float = 30.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (1-based), or ``None``: give up."""
        if attempt > self.retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        ceiling = min(self.maximum, self.initial * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)
