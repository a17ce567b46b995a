"""Exceptions, split by who must act: the developer (``UsageError``) or the run (``AgentError``).

::

    NbAgentError
    ├── UsageError              bad arguments or configuration: fix the call
    ├── KernelError             the live kernel or its front end could not do what a tool asked
    │   ├── KernelBusy            the kernel's main thread did not come free in time (kernel.main_thread)
    │   ├── SignalRefused         the interrupt signal could not be armed (kernel.guard)
    │   ├── FrontEndError         the notebook page answered with an error (kernel.workspace)
    │   ├── NoFrontEnd            no notebook page is connected (kernel.workspace)
    │   └── VerifyError           the notebook could not be run in a fresh kernel (kernel.verify)
    └── AgentError              the server or the network failed a run
        ├── AgentConnectError   nothing answered at the URL
        ├── HTTPStatusError     401/403/404/429/5xx ...
        ├── NotEventStreamError 2xx but not text/event-stream (JSON errors at HTTP 200)
        ├── StreamDroppedError  the connection broke mid-stream
        │   └── IdleTimeoutError  no data and no keep-alive for too long
        ├── FrameError          a frame too large or otherwise unusable
        ├── ProtocolError       the server reported an error in its own protocol
        └── OtherOriginError    the agent card points elsewhere: credentials are not sent there

Every ``AgentError`` turns into an ``error`` event with ``to_event()``; its message names the
status and a short body excerpt, never a credential: messages pass through
``nb_agent.secrets.redact`` when made and again when shown.
"""

from __future__ import annotations

from typing import Any

from nb_agent.events import ErrorReported
from nb_agent.secrets import redact


class NbAgentError(Exception):
    """Base of every nb-agent exception; ``str()`` never shows a secret (even one added later)."""

    def __str__(self) -> str:
        return redact(super().__str__())


class UsageError(NbAgentError, ValueError):
    """The caller used the API wrongly (unknown protocol, missing URL, bad option)."""


class KernelError(NbAgentError, RuntimeError):
    """The live kernel (or the notebook page it talks to) could not do what a tool asked; the
    subclasses live beside the code that raises them, in ``nb_agent.kernel``."""


class AgentError(NbAgentError):
    """A run failed because of the server or the network."""

    code: str | None = None
    retryable: bool = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable

    def to_event(self) -> ErrorReported:
        return ErrorReported(message=self.message, code=self.code, retryable=self.retryable)


class AgentConnectError(AgentError):
    code = "connect_error"
    retryable = True


_STATUS_HINTS = {
    400: "the server rejected the request",
    401: "unauthorized: the server rejected the credentials (check --header or the API key)",
    403: "forbidden: the credentials are not allowed to do this",
    404: "not found: check the URL and the --protocol",
    405: "method not allowed: check the URL and the --protocol",
    409: "conflict: the server is already handling this request",
    413: "the request is too large for the server",
    422: "the server could not process the request body",
    429: "rate limited: the server asks to slow down",
}


class HTTPStatusError(AgentError):
    def __init__(
        self, status: int, url: str, excerpt: str, *, retry_after: float | None = None, attempts: int = 1
    ) -> None:
        hint = _STATUS_HINTS.get(status) or (
            "server error: the agent server failed" if status >= 500 else "unexpected HTTP status"
        )
        tail = f" (after {attempts} attempts)" if attempts > 1 else ""
        body = f": {excerpt}" if excerpt else ""
        super().__init__(
            f"HTTP {status} from {url}{tail}: {hint}{body}",
            code=f"http_{status}",
            retryable=status == 429 or status >= 500,
        )
        self.status = status
        self.url = url
        self.excerpt = redact(excerpt)
        self.retry_after = retry_after


class NotEventStreamError(AgentError):
    """A 2xx answer that is not an event stream; ``body_json`` holds a parsed JSON body, if any."""

    code = "not_event_stream"

    def __init__(self, status: int, url: str, content_type: str, excerpt: str, body_json: Any = None) -> None:
        super().__init__(
            f"HTTP {status} from {url} answered with {content_type or 'no content type'}, "
            f"not an event stream: {excerpt}"
        )
        self.status = status
        self.url = url
        self.content_type = content_type
        self.excerpt = redact(excerpt)
        self.body_json = body_json


class StreamDroppedError(AgentError):
    code = "stream_dropped"
    retryable = True


class IdleTimeoutError(StreamDroppedError):
    code = "idle_timeout"


class FrameError(AgentError):
    code = "bad_frame"


class ProtocolError(AgentError):
    """An error the server reported in its own protocol (JSON-RPC error, RUN_ERROR, Error frame)."""

    code = "protocol_error"


class OtherOriginError(AgentError):
    """The agent card names an endpoint on another origin than the URL the user typed.

    The user's headers (``Authorization``, ``x-api-key`` ...) are only sent where the user sent
    them; ``follow_card_url=True`` (``--follow-card-url``) opts in to following the card.
    """

    code = "other_origin"
