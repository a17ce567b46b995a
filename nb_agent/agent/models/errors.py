"""Why a model could not be pulled (``NbAgentError`` → ``PullError``); a name that names nothing is
a ``UsageError`` instead: the caller fixes that one."""

from __future__ import annotations

from nb_agent.errors import NbAgentError


class PullError(NbAgentError, RuntimeError):
    """The download could not be done: the Hub or Ollama said no, the network failed, or the
    machine cannot take the file (``NoRoom``), or the file is not what the Hub says (``ChecksumError``)."""


class NoRoom(PullError):
    """Not enough free disk for the file, found before any byte was downloaded."""


class ChecksumError(PullError):
    """The downloaded bytes do not hash to what the Hub says the file is; they were deleted."""
