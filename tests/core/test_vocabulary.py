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


def test_the_error_event_is_named_as_an_event_and_the_old_name_still_imports() -> None:
    from nb_agent.events import Error, ErrorReported, parse_event

    assert Error is ErrorReported
    event = parse_event({"type": "error", "message": "boom"})
    assert isinstance(event, ErrorReported)
    assert not issubclass(ErrorReported, Exception)


def test_the_ag_ui_mapper_dispatches_on_a_table_of_named_handlers() -> None:
    """Every handler method is in the table under its wire type, and a frame reaches it there."""
    from nb_agent.protocols.agui.decode import HANDLERS, AGUIMapper

    methods = {name for name in dir(AGUIMapper) if name.startswith("_on_")}
    assert {handler.__name__ for handler in HANDLERS.values()} == methods
    assert all(HANDLERS[kind].__name__ == "_on_" + kind.lower() for kind in HANDLERS)


def test_comments_cite_public_specifications_not_files_outside_the_repository() -> None:
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "nb_agent"
    outside = ("protocols.md", "/work/", "seed ``", "the seed's", "(seed ")
    wrong = [
        f"{path.relative_to(package.parent)}:{n}"
        for path in sorted(package.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(word in line for word in outside)
    ]
    assert not wrong, wrong
