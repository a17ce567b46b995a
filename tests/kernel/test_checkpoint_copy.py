"""How a checkpoint copies variables (``nb_agent.kernel.checkpoint_copy``), and which it must copy
(``nb_agent.kernel.checkpoint_names``): in process, on the objects themselves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from nb_agent.kernel.checkpoint_copy import OverBudget, copy, cow, held, reference
from nb_agent.kernel.checkpoint_names import groups, reach


def test_a_frame_is_kept_as_a_copy_on_write_copy_not_copied_whole() -> None:
    """pandas 3 copies on write: the checkpoint of a 1-column-written frame holds that column, not the frame."""
    df = pd.DataFrame(np.ones((100_000, 4)), columns=list("abcd"))
    assert cow(df)
    saved = copy({"df": df}, limit=10_000)  # far less than the frame's 3.2 MB: it must not be copied
    assert saved.buffers == []
    assert saved.memory < 10_000
    assert held(saved, {"df": df}) == 0  # all its blocks still shared with the live frame
    df.loc[0, "a"] = -1.0  # pandas copies column a for the live frame; b, c, d still view the old block
    assert held(saved, {"df": df}) == 0  # which stays alive with or without the checkpoint
    df *= 2  # every block anew: the old one is the checkpoint's alone now
    assert held(saved, {"df": df}) == df.memory_usage(index=False).sum()
    back = saved.load()["df"]
    assert back.loc[0, "a"] == 1.0
    assert back.loc[5, "d"] == 1.0
    assert list(back.columns) == list("abcd")


def test_an_old_object_kept_by_reference_counts_once_no_variable_holds_it() -> None:
    old = np.zeros(10_000)
    namespace: dict[str, Any] = {"x": old}
    kept = reference("x", old)
    assert kept.memory < 200  # the pickle of {x: <the object>}
    assert held(kept, namespace) == 0  # x still holds it: it costs the checkpoint nothing
    namespace["x"] = "rebound"
    assert held(kept, namespace) == old.nbytes
    assert kept.load()["x"] is old  # the very object comes back


def test_arrays_are_copied_once_and_names_of_one_object_stay_one() -> None:
    a = b = np.arange(10.0)
    holder = {"inner": a}
    saved = copy({"a": a, "b": b, "holder": holder}, limit=1e9)
    assert len(saved.buffers) == 1  # one buffer for the one array
    a += 1
    back = saved.load()
    assert back["a"] is back["b"]
    assert back["holder"]["inner"] is back["a"]
    assert back["a"].tolist() == list(np.arange(10.0))


def test_functions_classes_and_modules_are_kept_by_reference() -> None:
    def helper() -> int:
        return 1

    saved = copy({"f": helper, "kind": dict, "np": np, "data": [helper]}, limit=1e9)
    back = saved.load()
    assert back["f"] is helper
    assert back["kind"] is dict
    assert back["np"] is np
    assert back["data"][0] is helper


def test_the_budget_stops_a_copy_and_what_cannot_be_pickled_says_why() -> None:
    with pytest.raises(OverBudget):
        copy({"big": np.zeros(10_000)}, limit=1_000)
    with pytest.raises(TypeError, match="generator"):
        copy({"gen": (i for i in range(3))}, limit=1e9)


@pytest.mark.parametrize(
    ("code", "changed", "rebound", "everything"),
    [
        ("x = 1\ndel y", set(), {"x", "y"}, None),
        ("df.drop(columns=['a'], inplace=True)", {"df"}, set(), None),
        ("arr += 1", {"arr"}, set(), None),
        ("print(len(big), big.shape, f'{big}')", set(), set(), None),
        ("clean(df)", {"clean", "df", "log"}, set(), None),  # clean's globals: log
        ("globals()['x'] = 2", set(), set(), "it calls globals()"),
        ("exec('x = 2')", set(), set(), "it calls exec()"),
        ("%time df.drop(columns=['a'], inplace=True)", {"df"}, set(), None),
        ("%matplotlib inline", set(), set(), "it runs the magic %matplotlib"),
    ],
)
def test_what_code_can_reach(code: str, changed: set[str], rebound: set[str], everything: str | None) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    namespace: dict[str, Any] = {"df": None, "arr": None, "big": None, "log": [], "y": 1}
    exec("def clean(frame):\n    log.append('cleaned')", namespace)  # a user's function: its globals are the namespace
    del namespace["__builtins__"]
    found = reach(TransformerManager().transform_cell(code), namespace)
    assert found.changed == changed
    assert found.rebound == rebound
    assert found.everything == everything


def test_names_sharing_an_object_are_grouped() -> None:
    shared = [1]
    namespace = {"a": shared, "b": {"k": shared}, "c": [2], "d": (shared,), "n": 5}
    found = groups(namespace, namespace)
    assert found["a"] == {"a", "b", "d"}
    assert found["c"] == {"c"}
    assert found["n"] == {"n"}
