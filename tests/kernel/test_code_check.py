"""run_code's check: what shows, before code runs in the kernel, that it cannot work there.

The embedded model draws its code again when the check finds a problem (tests/agent/test_local_tools.py);
here the check itself, on a real IPython shell's namespace, and the promise that it runs nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from nb_agent.kernel.code_check import code_problem
from nb_agent.tool_contract import Tool


@pytest.fixture
def ns() -> dict[str, Any]:
    return {
        "sales": pd.DataFrame({"region": ["north", "south"], "revenue": [120, 80], "units": [12, 8]}),
        "temps": np.array([21.5, 23.0]),
        "np": np,
        "pd": pd,
        "helper": len,
    }


@pytest.mark.parametrize(
    "code",
    [
        "print(len(sales))",
        "sales['revenue'].mean()",
        "sales.revenue.max()",
        "sales['price'] = sales['revenue'] / sales['units']\nprint(sales['price'])",
        "sales = sales.dropna()",
        "temps = temps * 9 / 5 + 32",
        "import math\nmath.sqrt(temps.mean())",
        "def f(x):\n    return x + 1\nf(2)",
        "[n for n in range(3) if n]",
        "total = sum(units for units in sales['units'])",
        "try:\n    1 / 0\nexcept ZeroDivisionError as err:\n    print(err)",
        "helper = max",  # a function of the user's, not data
    ],
)
def test_code_that_can_work_passes(ns: dict[str, Any], code: str) -> None:
    assert code_problem(code, ns) is None


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("print(len(sales)", "it does not parse"),
        ("sales: pandas.DataFrame shape (8, 3)", "it does not parse"),  # the variables' listing, copied
        ("", "it is empty"),
        ("print(df.shape)", "it reads 'df', which is not defined"),
        ("top = top.max()", "it reads 'top', which is not defined"),
        ("sales = pd.DataFrame({'region': ['a'], 'units': [1]})", "it replaces the user's variable 'sales'"),
        ("temps = np.array([10, 25])\nprint(temps.max())", "it replaces the user's variable 'temps'"),
        (
            "ratio = sales['revenue'] / sales['unit']",
            "sales has no column 'unit' (its columns: region, revenue,",
        ),
        ("sales.sort()", "sales (DataFrame) has no attribute 'sort'"),
        ("temps.to_celsius()", "temps (ndarray) has no attribute 'to_celsius'"),
    ],
)
def test_code_that_cannot_work_is_named(ns: dict[str, Any], code: str, problem: str) -> None:
    found = code_problem(code, ns)
    assert found is not None
    assert found.startswith(problem), found


def test_the_check_runs_no_code_of_the_users_objects() -> None:
    """Attributes are looked up statically: a ``__getattr__`` (which could do anything) is not called,
    and an object with one is given the benefit of the doubt."""
    called: list[str] = []

    class Dynamic:
        def __getattr__(self, name: str) -> Any:
            called.append(name)
            raise AttributeError(name)

    class Columns:
        @property
        def rows(self) -> int:
            called.append("rows")
            return 1

    assert code_problem("thing.anything()", {"thing": Dynamic()}) is None
    assert code_problem("obj.rows + obj.missing", {"obj": Columns()}) == "obj (Columns) has no attribute 'missing'"
    assert called == []


def test_the_kernel_tool_checks_against_the_live_namespace(ipython: Any) -> None:
    """``run_code``'s check reads the kernel's own variables and IPython's syntax (a magic parses)."""
    from nb_agent.kernel.toolset import kernel_tools

    ipython.run_cell("checked_frame = __import__('pandas').DataFrame({'a': [1, 2]})")
    run_code: Tool = next(t for t in kernel_tools(ipython) if t.name == "run_code")
    assert run_code.check is not None
    assert run_code.check({"code": "checked_frame['a'].sum()"}) is None
    assert run_code.check({"code": "%time checked_frame['a'].sum()"}) is None
    assert run_code.check({"code": "checked_frame['b'].sum()"}) == "checked_frame has no column 'b' (its columns: a)"
    assert (
        run_code.check({"code": "print(not_defined_anywhere)"})
        == "it reads 'not_defined_anywhere', which is not defined"
    )
    # tools other than run_code check nothing
    assert all(t.check is None for t in kernel_tools(ipython) if t.name != "run_code")
