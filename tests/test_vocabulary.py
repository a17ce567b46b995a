"""Names that say which one is meant (issue 24, item 3): one error tree, the old names still importable."""

from __future__ import annotations

import pytest

from nb_agent.errors import KernelError, NbAgentError
from nb_agent.kernel.guard import SignalRefused
from nb_agent.kernel.main_thread import KernelBusy
from nb_agent.kernel.verify import VerifyError
from nb_agent.kernel.workspace import FrontEndError, NoFrontEnd


@pytest.mark.parametrize("cls", [KernelBusy, NoFrontEnd, SignalRefused, FrontEndError, VerifyError])
def test_the_kernels_exceptions_are_in_the_projects_error_tree(cls: type[Exception]) -> None:
    assert issubclass(cls, KernelError)
    assert issubclass(cls, NbAgentError)  # `except NbAgentError` (the CLI, chat()) catches them
    assert issubclass(cls, RuntimeError)  # what they were: callers' `except RuntimeError` still holds
