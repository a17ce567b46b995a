"""The grammar of the embedded model's code: one short statement over the names the kernel holds.

Left free, SmolLM2-135M writes code that cannot work here: names nothing defines, columns the
table lacks, methods of its own invention, data or constants made up in place of the user's
(``num_regions = 752``, ``sales = pd.DataFrame(...)``). Redrawing what the check refuses only
helps when one of three draws happens to be right. So the code is decoded under a grammar
(llama.cpp GBNF, https://github.com/ggml-org/llama.cpp/blob/master/grammars/README.md) whose
sentences are the code that can work in this kernel:

- one line: an expression, or an assignment of one to a new name or to a table's column;
- the value reads the user's data: it opens with one of the kernel's variables (or a builtin,
  or a function of an imported module such as ``np``, over an expression that does), so a
  constant or data of the model's own can never stand in for the user's;
- a table's columns only as its own column names (string literals), methods and attributes from
  a fixed list of the common pandas / numpy ones (``METHODS``), builtins from ``FUNCTIONS``, a
  module's functions from ``MODULE_FUNCTIONS`` that the module really has;
- numbers and operators in between, so ``x * 9 / 5 + 32`` and ``df[df["a"] > 100]`` can be said.

Methods that change the user's data in place (``sort``, ``pop``, ``drop(inplace=True)``) are not
in the lists: the call runs under approval, but code that answers a question should not alter
what it was asked about.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

# common reductions, transforms and views of pandas Series / DataFrames and numpy arrays; a call
# that does not apply to the object fails when it runs, and the model reads the error
METHODS = (
    "mean", "sum", "max", "min", "median", "std", "var", "count", "nunique", "unique", "value_counts",
    "sort_values", "sort_index", "groupby", "idxmax", "idxmin", "argmax", "argmin", "head", "tail",
    "describe", "round", "abs", "cumsum", "astype", "tolist", "reset_index", "dropna", "fillna", "isna",
    "copy", "agg", "mode", "nlargest", "nsmallest", "plot", "apply", "prod", "any", "all", "to_list",
)  # fmt: skip
ATTRIBUTES = ("shape", "columns", "index", "dtypes", "dtype", "size", "ndim", "T", "values", "str")
# no print: an expression's value is shown anyway, and the model nested print() inside sums
FUNCTIONS = ("len", "sum", "max", "min", "sorted", "round", "abs", "list", "set", "float", "int")
MODULE_FUNCTIONS = {
    "numpy": (
        "mean", "sum", "max", "min", "median", "std", "sort", "round", "unique", "argmax", "argmin",
        "argsort", "cumsum", "sqrt", "abs", "log", "percentile", "where", "array",
    ),
    "pandas": ("to_numeric", "to_datetime", "concat", "Series"),
}  # fmt: skip
KEYWORDS = ("ascending", "axis", "ddof", "decimals", "n", "normalize", "dropna", "kind", "x", "y", "title")
MAX_TRAILERS = 6  # .groupby("a")["b"].sum().idxmax() is five
MAX_OPERATIONS = 3  # x * 9 / 5 + 32; left free, the model strings operations on without end


MAX_NAME = 30


def new_name_rules(taken: Sequence[str]) -> list[str]:
    """GBNF rules for ``newname``: a lower-case identifier of at most ``MAX_NAME`` characters that
    is none of ``taken`` (the user's variables, which an assignment would replace; Python's
    keywords, which do not parse as names). Built as the complement of ``taken``'s trie: at each
    node, a character off the trie leads to a free tail; one on it, to the trie's next node; the
    identifier may end anywhere but on a taken word."""
    first = "abcdefghijklmnopqrstuvwxyz_"
    rest = first + "0123456789"
    words = {w for w in taken if 0 < len(w) <= MAX_NAME and w[0] in first and set(w) <= set(rest)}
    rules: list[str] = []

    def node(prefix: str) -> str:
        name = "newname" if not prefix else f"newname{len(rules)}"
        index = len(rules)
        rules.append("")  # filled in below, after the children have their numbers
        children = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and len(w) > len(prefix)})
        free = "".join(c for c in (rest if prefix else first) if c not in children)
        left = MAX_NAME - len(prefix) - 1  # characters the tail may still add
        alternatives = [f"[{free}] [{rest}]{{0,{left}}}"] if free and left >= 0 else []
        alternatives += [f'"{c}" {node(prefix + c)}' for c in children if len(prefix) + 1 <= MAX_NAME]
        body = " | ".join(alternatives) or '""'
        if prefix and prefix not in words:
            body = f"({body})?"
        rules[index] = f"{name} ::= {body}"
        return name

    node("")
    return rules


def _alts(words: Sequence[str]) -> str:
    return " | ".join(json.dumps(w) for w in words)


_NAMED = re.compile(r"\b(?:called|named)\s+`?([A-Za-z_][A-Za-z0-9_]*)|`?\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")


_NEW_COLUMN = re.compile(r"\b(?:a|new)\s+column\s+(?:called\s+|named\s+)?`?([A-Za-z_][A-Za-z0-9_]*)")
# words that follow "a column" without naming it ("add a column to sales that ...")
_NOT_A_NAME = frozenset(
    {"to", "for", "that", "with", "of", "in", "into", "on", "from", "which", "where", "as", "by", "and", "the", "is"}
)


_FIX = re.compile(r"\b(fix|error|failed|fails|broken|wrong|exception|traceback)\b", re.I)


def about_failure(request: str, vocabulary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The user's failed last cell (``code_vocabulary``'s ``failed``) when the request is about it
    ("my last cell failed, fix it"), else empty: its code is then part of what the request names."""
    failed = vocabulary.get("failed")
    return failed if isinstance(failed, Mapping) and _FIX.search(request) else {}


def requested_names(request: str, vocabulary: Mapping[str, Any]) -> list[str]:
    """The new variable names a request spells out: an identifier with an underscore
    (``total_units``), or a word after "called" / "named", or what the failed cell it asks to
    fix assigns; not a name the kernel already holds."""
    columns = [c for cols in vocabulary.get("tables", {}).values() for c in cols]  # "the column called x"
    taken = {*vocabulary.get("values", []), *vocabulary.get("modules", {}), *columns}
    names: list[str] = []
    found = [m.group(1) or m.group(2) for m in _NAMED.finditer(request)]
    for name in [*found, *about_failure(request, vocabulary).get("targets", [])]:
        if name not in taken and name not in names and not keyword.iskeyword(name) and len(name) <= MAX_NAME:
            names.append(name)
    return names


def code_grammar(vocabulary: Mapping[str, Any], request: str = "", *, grounded: bool = False) -> str | None:
    """GBNF for one line of code over ``vocabulary`` (``kernel.code_check.code_vocabulary``'s
    form), or None when the kernel holds no variables to read (then the code is left free).

    Where the ``request`` names the variable to make (``requested_names``), an assignment's target
    is that name: the model otherwise wrote a name of its own (``temps_sorted`` for ``sorted_temps``).
    Where it names a new column of a table ("add a column price"), the target is that column.
    ``grounded``: where the request names columns of a table, the table is read only through them
    (``sales["revenue"]``, ``sales[sales["revenue"] > 100]``), for a draw after code that left them
    out: drawn freely, the model wrote ``sales.count(max(sales))`` for "rows with a revenue above 100"."""
    values = [v for v in vocabulary.get("values", []) if isinstance(v, str)]
    if not values:
        return None
    tables: Mapping[str, Sequence[str]] = vocabulary.get("tables", {})
    modules: Mapping[str, str] = vocabulary.get("modules", {})
    data: list[str] = []
    all_columns: list[str] = []
    members: Mapping[str, Sequence[str]] = vocabulary.get("members", {})
    first_trailers: list[str] = []
    named = [json.loads(t) for t in request_terms(request, vocabulary) if t.startswith('"')] if grounded else []
    for name in values:
        columns = [c for c in tables.get(name, []) if '"' not in c and "\\" not in c]
        all_columns += [c for c in columns if c not in all_columns]
        if own := [json.dumps(c) for c in columns if c in named]:
            data.append(f'{json.dumps(name)} "[" ({_alts(own)}) "]" trailer{{0,{MAX_TRAILERS}}}')
            continue
        if name not in members:
            data.append(f"{json.dumps(name)} trailer{{0,{MAX_TRAILERS}}}")
            continue
        # the first member of a variable is one its type has (`temps.values` on an array: no)
        has = set(members[name])
        methods, attributes = [m for m in METHODS if m in has], [a for a in ATTRIBUTES if a in has]
        rule = f"first{len(first_trailers)}"
        alternatives = ['"[" index "]"']
        if methods:
            alternatives.append(f'"." ({_alts(methods)}) "(" args? ")"')
        if attributes:
            alternatives.append(f'"." ({_alts(attributes)})')
        first_trailers.append(f"{rule} ::= {' | '.join(alternatives)}")
        data.append(f"{json.dumps(name)} ({rule} trailer{{0,{MAX_TRAILERS - 1}}})?")
    module_calls = [
        f"{json.dumps(alias + '.')} ({_alts(MODULE_FUNCTIONS[module])})"
        for alias, module in modules.items()
        if module in MODULE_FUNCTIONS
    ]
    table_names = [n for n in values if tables.get(n)]
    asked = [c for c in _NEW_COLUMN.findall(request) if c not in all_columns and c.lower() not in _NOT_A_NAME]
    new_columns = asked if table_names else []
    wanted = requested_names(request, vocabulary)
    rules = [
        # the line's end ends the code: the model ends lines, not code; a request to make a name or
        # a column is an assignment to it (left optional, the model wrote `float(sales["revenue"])`)
        f'root ::= (target " = "){"" if new_columns or wanted else "?"} dexpr "\\n"',
        f'target ::= table "[" {_alts([json.dumps(new_columns[0])])} "]"'
        if new_columns
        else "target ::= newname" + (' | table "[" string "]"' if table_names and not wanted else ""),
        *(
            [f"newname ::= {_alts(wanted)}"]
            if wanted
            else new_name_rules([*values, *modules, *keyword.kwlist, *FUNCTIONS, "print"])
        ),
        f'dexpr ::= dterm (" " op " " term){{0,{MAX_OPERATIONS}}}',
        f'expr ::= term (" " op " " term){{0,{MAX_OPERATIONS}}}',
        'op ::= "+" | "-" | "*" | "/" | "//" | "%" | "**"',
        # comparisons only inside brackets: `(df["a"] > 1).sum()`, `df[df["a"] > 1]`; at the top
        # the model wrote `x == x.max()` where it meant to assign to a name the grammar keeps
        'test ::= dexpr (" " compare " " expr)?',
        'compare ::= ">" | "<" | ">=" | "<=" | "==" | "!=" | "&" | "|"',
        "term ::= dterm | number | string",
        f'dterm ::= datum | ("(" test ")" | call) trailer{{0,{MAX_TRAILERS}}}',
        # a builtin's argument does not open with another call: greedy, the model nested
        # `max(max(int((...` until the token cap
        f'call ::= builtin "(" (datum | "(" test ")" trailer{{0,{MAX_TRAILERS}}}) ")"'
        + (' | modcall "(" dexpr (", " arg)* ")"' if module_calls else ""),
        f"builtin ::= {_alts(FUNCTIONS)}",
        'trailer ::= "." method "(" args? ")" | "." attribute | "[" index "]"',
        f"method ::= {_alts(METHODS)}",
        f"attribute ::= {_alts(ATTRIBUTES)}",
        'args ::= arg (", " arg)*',
        'arg ::= (keyword "=")? (expr | "True" | "False" | "None")',
        f"keyword ::= {_alts(KEYWORDS)}",
        # a column, a mask, a position: an index computed otherwise (`df.shape[len(df)]`) was always wrong
        "index ::= "
        + ("anycolumn | " if all_columns else "")
        + 'dexpr " " compare " " expr | "-"? [0-9]',  # no column of the model's own
        'number ::= "-"? [0-9]{1,6} ("." [0-9]{1,4})?',
        'string ::= "\\"" [a-zA-Z0-9_ ]{1,30} "\\""',
        f"datum ::= {' | '.join(data)}",
        *first_trailers,
    ]
    if all_columns:
        rules.append(f"anycolumn ::= {_alts([json.dumps(c) for c in all_columns])}")
    if table_names:
        rules.append(f"table ::= {_alts(table_names)}")
    if module_calls:
        rules.append(f"modcall ::= {' | '.join(module_calls)}")
    return "\n".join(rules) + "\n"


# Worked examples of the commonest table and array idioms, on data of their own (a table
# ``orders`` and an array ``speeds`` that no kernel is assumed to hold), given to the model as
# earlier turns of the conversation: a request, then its code in the form the model's own call
# takes (a python block opened by the request as a comment). SmolLM2 copies the form and the
# idiom of turns it has just seen far better than it follows a description (measured: with the
# same examples in the system message it wrote ``sales.sum(axis=1) / len(sales)`` for a column's
# mean). The grammar keeps their names out of the code it writes for the user's data.
EXAMPLES_INTRO = "Examples, on a table orders (columns city, price, qty) and an array speeds:"
EXAMPLES = (
    ("how long is orders?", "len(orders)"),
    ("median price", 'orders["price"].median()'),
    ("the smallest speed", "speeds.min()"),
    ("mean of speeds", "speeds.mean()"),
    ("how many orders cost more than 20?", '(orders["price"] > 20).sum()'),
    ("how many distinct cities", 'orders["city"].nunique()'),
    ("the city with the most qty in total, as best_city", 'best_city = orders.groupby("city")["qty"].sum().idxmax()'),
    ("keep the number of missing prices in a variable missing", 'missing = orders["price"].isna().sum()'),
    ("add a column total, price times qty", 'orders["total"] = orders["price"] * orders["qty"]'),
    ("orders by price, cheapest first, as by_price", 'by_price = orders.sort_values("price")'),
    ("speeds in miles per hour as speeds_mph (they are in km/h)", "speeds_mph = speeds / 1.609"),
    ("which columns does orders have", "orders.columns"),
)


def example_turns(fence_open: str, fence_close: str) -> list[dict[str, str]]:
    """``EXAMPLES`` as chat turns for the model's template (user, then assistant)."""
    turns: list[dict[str, str]] = []
    for request, code in EXAMPLES:
        turns.append({"role": "user", "content": request})
        turns.append({"role": "assistant", "content": f"{fence_open}# {request}\n{code}\n{fence_close}"})
    return turns


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def request_terms(request: str, vocabulary: Mapping[str, Any]) -> list[str]:
    """What a request names that code doing it must show: a table's column it names (as that
    column's string literal; "regions" names the column ``region``), a number it gives, the new
    variable it asks for (``requested_names``); for a request about the failed last cell
    (``about_failure``), that cell's words too. Read the same way for any request."""
    words = {w.lower() for w in _WORD.findall(f"{request} {about_failure(request, vocabulary).get('source', '')}")}
    terms: list[str] = []
    for columns in vocabulary.get("tables", {}).values():
        for column in columns:
            low = str(column).lower()
            named = low in words or f"{low}s" in words or (low.endswith("s") and low[:-1] in words)
            if named and (literal := json.dumps(str(column))) not in terms:
                terms.append(literal)
    terms += list(dict.fromkeys(_NUMBER.findall(request)))
    return terms + requested_names(request, vocabulary)


def grounding(code: str, terms: Sequence[str]) -> int:
    """How many of the request's ``terms`` the code shows (a number or a name as a whole token)."""
    found = 0
    for term in terms:
        if term.startswith('"'):
            found += term in code
        else:
            found += re.search(rf"(?<![\w.]){re.escape(term)}(?![\w])", code) is not None
    return found
