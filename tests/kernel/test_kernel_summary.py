"""The kernel's summary for inline completions: what it says of each kind of variable, that it never
says a value or a secret, that it is bounded, and that a real kernel pushes it to the page after
each cell (and to a page that links late) over the workspace comm."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.summary import NamespaceSummary, describe, names_in, summarize_namespace
from tests.fake_workspace import FakeFrontEnd

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-proj-" + "Q7x" * 14  # shaped like an OpenAI key: the registry masks it wherever it shows


def shell(**names: Any) -> Any:
    return types.SimpleNamespace(user_ns=dict(names), user_ns_hidden={})


def test_a_table_is_described_by_its_shape_columns_and_dtypes_and_never_its_rows() -> None:
    sales = pd.DataFrame({"region": ["north", "south"], "revenue": [10.5, 3.0], "units": [1, 2]})
    line = describe("sales", sales)
    assert line.startswith("sales: pandas.DataFrame shape (2, 3), columns 'region' ")
    assert "'revenue' float64" in line
    assert "'units' int64" in line
    assert "north" not in line
    assert "10.5" not in line
    assert describe("r", sales["revenue"]) == "r: pandas.Series shape (2,) dtype float64 name 'revenue'"
    assert describe("a", np.zeros((3, 4))) == "a: numpy.ndarray shape (3, 4) dtype float64"


def test_other_kinds_say_what_code_needs_and_no_values() -> None:
    def clean(frame: Any, threshold: float = 0.5) -> None:
        pass

    assert describe("clean", clean) == "clean: function(frame: 'Any', threshold: 'float' = 0.5) -> 'None'"
    assert describe("pd", pd) == "pd: module pandas"
    assert describe("Point", type("Point", (), {})) == "Point: class Point"
    assert describe("cfg", {"lr": 0.1, "epochs": 3}) == "cfg: dict len 2 keys 'lr', 'epochs'"
    assert describe("password", "hunter2-is-my-password") == "password: str len 22"
    assert describe("n", 42) == "n: int"
    wide = pd.DataFrame({f"c{i}": [i] for i in range(40)})
    assert describe("wide", wide).endswith("'c29' int64, …")


def test_secrets_are_masked_and_values_never_shown() -> None:
    text = summarize_namespace(shell(api_key=KEY, headers={KEY: "x"}, table=pd.DataFrame({KEY: [1]})))
    assert KEY[:12] not in text, text
    assert "api_key: str len 50" in text
    assert "***" in text


def test_the_summary_is_bounded_and_keeps_the_newest_variables() -> None:
    names = {f"v{i}": i for i in range(500)}
    text = summarize_namespace(shell(**names), limit=200)
    assert len(text) <= 240
    assert text.splitlines()[-1] == "v499: int"
    assert text.startswith("(")
    assert "older variables not listed" in text.splitlines()[0]


def test_a_variable_changed_in_place_is_described_again_when_the_cell_names_it() -> None:
    sales = pd.DataFrame({"region": ["n"]})
    ns = shell(sales=sales, other=pd.DataFrame({"a": [1]}))
    summary = NamespaceSummary()
    assert "'region'" in summary.update(ns)
    sales["revenue"] = [1.0]  # the same object, a column more
    assert "'revenue'" not in summary.update(ns, names_in("x = 1"))  # a cell that does not name it
    assert "'revenue' float64" in summary.update(ns, names_in('sales["revenue"] = [1.0]'))
    ns.user_ns["other"] = pd.DataFrame({"b": [1]})  # a new object: described whatever the cell said
    assert "'b' int64" in summary.update(ns, set())


class Page(FakeFrontEnd):
    """The fake page, keeping the summaries the kernel pushes (the extension keeps the latest)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.summaries: list[str] = []

    def pump(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        data = content.get("data") or {} if msg["msg_type"] == "comm_msg" else {}
        if content.get("comm_id") == self.comm_id and data.get("type") == "summary":
            self.summaries.append(data["text"])
        super().pump(msg)


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    env["SERVICE_TOKEN"] = "tok-" + "9f" * 12  # a credential by its name: the registry knows its value
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        yield Page(kc, [])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.timeout(180)
def test_the_kernel_pushes_its_summary_after_each_cell_and_to_a_page_that_links(page: Page) -> None:
    assert page.execute("import pandas as pd\nsales = pd.DataFrame({'region': ['n'], 'revenue': [1.5]})").error is None
    assert page.execute("%load_ext nb_agent").error is None
    page.settle()
    assert page.comm_id is not None
    # the page linked (after %load_ext): it got the summary at once, before any other cell ran
    assert page.summaries, "no summary on linking"
    assert "sales: pandas.DataFrame shape (1, 2), columns 'region' " in page.summaries[-1]
    assert "pd: module pandas" in page.summaries[-1]

    count = len(page.summaries)
    cell = "sales['units'] = [3]\nimport os\ntoken = os.environ['SERVICE_TOKEN']\nkey = " + repr(KEY)
    assert page.execute(cell).error is None
    page.settle(0.3)
    assert len(page.summaries) == count + 1
    latest = page.summaries[-1]
    assert "'units' int64" in latest
    assert "token: str len 28" in latest
    assert "key: str len 50" in latest
    assert all("9f9f9f" not in s and KEY[:12] not in s for s in page.summaries)

    count = len(page.summaries)
    assert page.execute("1 + 1").error is None  # nothing changed: nothing sent
    page.settle(0.3)
    assert len(page.summaries) == count
    took = page.execute("from nb_agent.kernel import summary_push\nprint(summary_push.current().last_seconds)")
    assert 0 < float(took.stdout) < 0.5
