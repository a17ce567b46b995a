"""Secrets nb-agent can recognise, and ``redact(text)``: the one place they are masked.

Three sources make a value secret:

* every value the user gave as a header or key (``--header``, ``--api-key-env``,
  ``NB_AGENT_HEADERS``, ``%agent_config``, a client's ``headers=`` / ``api_key=``), registered
  where it enters; and whatever ``add(...)`` is given;
* the values of environment variables whose names look like credentials (``*_KEY``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*`` ...) or match ``NB_AGENT_SECRET_NAMES`` /
  ``add_names(...)``;
* strings shaped like well-known credentials (OpenAI / Anthropic ``sk-``, GitHub, AWS, Slack,
  Google, Hugging Face keys, JWTs, ``Bearer`` tokens, private-key PEM blocks).

A server echoes a key in many forms, so each value is matched raw, JSON-escaped, HTML-escaped,
URL-encoded, base64 (also inside a longer base64 text such as ``user:key``), in any letter case (a
model writing a key into a host name lower-cases it), and by any prefix of at least
``PREFIX_CHARS`` characters of any of these forms. An environment value is taken without the
whitespace around it (a value read from a file keeps its newline). A key shape also counts after
an escape (``'\\nsk-...'`` in a repr). Values shorter than ``MIN_CHARS`` are ignored: masking
them would mangle ordinary text. ``spans`` and ``scan`` serve text that arrives in
pieces (``nb_agent.secret_stream``); ``nb_agent.secret_data`` redacts through data.

All forms go into one regular expression shaped as a trie (rebuilt only when the set of secrets
changes), so redaction is one linear scan whatever the number of secrets. Python's ``re`` has no
multi-literal matcher and the alternatives (pyahocorasick) are C extensions for what is 30
lines here. Importing this module also makes every ``nb_agent.*`` log record pass through
``redact``.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import html
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_CHARS = 6
PREFIX_CHARS = 12
_ENV_REFRESH_S = 1.0

# Names of environment variables whose values are credentials; PWD/OLDPWD are directories.
_SECRET_NAME = re.compile(
    r"(?:KEY|TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIALS?|COOKIE)S?(?:_|$)|(?:^|_)(?:AUTH|PASS|PAT)(?:_|$)",
    re.IGNORECASE,
)
# Where a key shape may start: after a character that cannot be part of it, or after an escape a
# repr or JSON text writes before it (``'a\\nsk-...'``: the character before the key is ``n``).
_BOUNDARY = r"(?:(?<![\w-])|(?<=\\[nrtvfab0])|(?<=\\x[0-9A-Fa-f]{2})|(?<=\\u[0-9A-Fa-f]{4}))"
_SHAPES = re.compile(
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)"
    r"|" + _BOUNDARY + r"(?:"
    r"sk-[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r")(?![\w-])"
    r"|(?<=\b[Bb]earer )[A-Za-z0-9._~+/-]{16,}=*",
    re.ASCII,
)

_SHAPE_MIN = 15  # characters of the shortest text a shape matches (``xoxb-`` and ten more)
# Literal pieces every shape contains: ``in`` finds them far faster than the shapes' regex runs.
_SHAPE_HINTS: tuple[str, ...] = (
    *("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox", "AIza", "hf_", "eyJ"),
    *("earer ", "PRIVATE KEY"),
)

_lock = threading.RLock()  # re-entered when the GC runs a finalizer that logs during a rebuild
_given: set[str] = set()  # values the user gave: all forms and prefixes
_names: set[str] = set()  # add_names(): environment variable names or glob patterns
_env_values: frozenset[str] = frozenset()
_env_checked = 0.0
_stale = True


class _Matcher(NamedTuple):
    """What the current secrets compile to (rebuilt only when they change)."""

    trie: re.Pattern[str] | None  # every form, and the first PREFIX_CHARS characters of each
    seeds: dict[str, tuple[str, ...]]  # a form's first PREFIX_CHARS characters (folded) -> the forms
    partial: re.Pattern[str] | None  # a text's end that may be the first characters of a form


_state = _Matcher(None, {}, None)


# -- registering ------------------------------------------------------------------------------
def add(*values: str | None) -> None:
    """Treat each value as a secret from now on (in every echoed form)."""
    global _stale
    new = {v for value in values if value for v in _derived(value) if len(v) >= MIN_CHARS}
    with _lock:
        if not new <= _given:
            _given.update(new)
            _stale = True


def add_headers(headers: Mapping[str, str]) -> None:
    """Every header value the user gave is a secret, whatever the header's name."""
    add(*headers.values())


def add_names(*names: str) -> None:
    """Treat the values of these environment variables (names or glob patterns) as secrets."""
    global _env_checked
    with _lock:
        _names.update(n.strip() for n in names if n.strip())
        _env_checked = 0.0  # read the environment again at the next redact()


def clear() -> None:
    """Forget every value and name added (the environment and the shapes still apply)."""
    global _stale, _env_checked
    with _lock:
        _given.clear()
        _names.clear()
        _env_checked = 0.0
        _stale = True


def _derived(value: str) -> list[str]:
    """The value, and the credential inside ``Bearer x`` / ``Basic base64(user:password)``."""
    out = [value.strip()]
    scheme, _, token = value.strip().partition(" ")
    if token and scheme.lower() in ("bearer", "basic", "token", "apikey", "key"):
        out.append(token.strip())
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(token.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                pair = ""
            out += [pair, pair.partition(":")[2]] if ":" in pair else []
    return out


# -- the environment --------------------------------------------------------------------------
def _secret_name(name: str, patterns: Iterable[str]) -> bool:
    return bool(_SECRET_NAME.search(name)) or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _read_env() -> frozenset[str]:
    patterns = set(_names)
    patterns.update(p.strip() for p in re.split(r"[,;\s]+", os.environ.get("NB_AGENT_SECRET_NAMES", "")) if p.strip())
    return frozenset(
        value.strip()  # a value read from a file keeps its newline; the key is what comes back
        for name, value in os.environ.items()
        if len(value.strip()) >= MIN_CHARS and name != "NB_AGENT_SECRET_NAMES" and _secret_name(name, patterns)
    )


def _current(fresh_env: bool) -> _Matcher:
    global _env_values, _env_checked, _state, _stale
    now = time.monotonic()
    if fresh_env or now - _env_checked >= _ENV_REFRESH_S:
        values = _read_env()
        with _lock:
            _env_checked = now
            if values != _env_values:
                _env_values, _stale = values, True
    if _stale:
        with _lock:
            if _stale:
                _state, _stale = _build(_given, _env_values), False
    return _state


# -- matching ---------------------------------------------------------------------------------
def _forms(value: str) -> set[str]:
    """How a server may echo ``value``: escaped, encoded, or inside a longer base64 text."""
    forms = {value, html.escape(value)}
    for js in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        forms |= {js, js.replace("/", "\\/")}
    for q in (quote(value, safe=""), quote_plus(value), quote(value)):
        forms |= {q, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), q)}
    raw = value.encode()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode())
        for shift in range(3):  # the part of base64(prefix + value) that depends on the value alone
            core = raw[shift:]
            core = core[: len(core) // 3 * 3]
            if len(core) >= MIN_CHARS:
                forms.add(encode(core).decode())
    return {f for f in forms if len(f) >= MIN_CHARS}


def _fold(text: str) -> str:
    """Lower case, character by character (``re.IGNORECASE`` matches the folded words in any case:
    a model writes a key into a host name lower-cased); a character whose lower case is longer stays."""
    low = text.lower()
    return low if len(low) == len(text) else "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _build(given: Iterable[str], env: Iterable[str]) -> _Matcher:
    forms: set[str] = set()
    for value in (*given, *env):
        forms |= {_fold(f) for f in _forms(value)}
    if not forms:
        return _Matcher(None, {}, None)
    seeds: dict[str, tuple[str, ...]] = {}
    for form in sorted(forms, key=len, reverse=True):
        if len(form) > PREFIX_CHARS:  # any prefix of PREFIX_CHARS or more is the secret too
            seeds[form[:PREFIX_CHARS]] = (*seeds.get(form[:PREFIX_CHARS], ()), form)
    trie = re.compile(_trie(forms | seeds.keys()), re.IGNORECASE)
    partial = _trie({f[: PREFIX_CHARS - 1] for f in forms}, partial=True)
    return _Matcher(trie, seeds, re.compile(f"(?:{partial})\\Z", re.IGNORECASE))


def _trie(words: Iterable[str], *, partial: bool = False) -> str:
    """One pattern matching the longest of ``words`` at each position (literal runs compressed);
    ``partial``: any non-empty prefix of them (each step optional, so words must be short)."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        alternatives = []
        for ch in sorted(k for k in node if k):
            if partial:
                rest = pattern(node[ch])
                alternatives.append(re.escape(ch) + (f"(?:{rest})?" if rest else ""))
                continue
            run, child = [ch], node[ch]
            while len(child) == 1 and "" not in child:
                ((nxt, child),) = child.items()
                run.append(nxt)
            alternatives.append(re.escape("".join(run)) + pattern(child))
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        return f"(?:{body})?" if "" in node and not partial else body  # greedy: the longer word wins

    return pattern(root)


def _extend(text: str, start: int, end: int, seeds: dict[str, tuple[str, ...]]) -> int:
    """A match that is only a form's first characters goes on as far as the text follows a form."""
    forms = seeds.get(_fold(text[start:end]))
    if forms is None:
        return end
    best = end
    for form in forms:
        stop = end
        while stop < len(text) and stop - start < len(form) and _fold(text[stop]) == form[stop - start]:
            stop += 1
        best = max(best, stop)
    return best


def redact(text: str, *, fresh_env: bool = False) -> str:
    """``text`` with every recognisable secret replaced by ``***``; linear in ``len(text)``.

    The environment is re-read at most once a second, or now with ``fresh_env=True``.
    """
    if len(text) < MIN_CHARS:
        return text
    return _redact(text, _current(fresh_env))


def redactor() -> Callable[[str], str]:
    """``redact`` bound to the secrets known now: for many strings at once (an event's data)."""
    matcher = _current(False)
    return lambda text: text if len(text) < MIN_CHARS else _redact(text, matcher)


def _redact(text: str, matcher: _Matcher) -> str:
    trie, seeds, _ = matcher
    if trie is not None and trie.search(text) is not None:
        out: list[str] = []
        pos = 0
        while (m := trie.search(text, pos)) is not None:
            start = m.start()
            end = _extend(text, start, m.end(), seeds)
            out += [text[pos:start], MASK]
            pos = end
        text = "".join(out) + text[pos:]
    if len(text) >= _SHAPE_MIN:
        for hint in _SHAPE_HINTS:  # a plain loop: any(generator) costs more than the search
            if hint in text:
                return _SHAPES.sub(MASK, text)
    return text


def spans(text: str, *, fresh_env: bool = False) -> list[tuple[int, int]]:
    """Where ``redact`` masks ``text``: sorted, disjoint ``(start, end)`` ranges."""
    return _spans(text, _current(fresh_env)) if len(text) >= MIN_CHARS else []


def scan(text: str) -> tuple[list[tuple[int, int]], int]:
    """``spans(text)``, and where the end of ``text`` may be the first characters of a secret's form
    (``len(text)`` if nowhere): what streamed text needs, with one look at the current secrets."""
    matcher = _current(False)
    found = _spans(text, matcher) if len(text) >= MIN_CHARS else []
    if matcher.partial is None or (m := matcher.partial.search(text, max(0, len(text) - PREFIX_CHARS))) is None:
        return found, len(text)
    return found, m.start()


def _spans(text: str, matcher: _Matcher) -> list[tuple[int, int]]:
    trie, seeds, _ = matcher
    found: list[tuple[int, int]] = []
    if trie is not None:
        pos = 0
        while (m := trie.search(text, pos)) is not None:
            found.append((m.start(), _extend(text, m.start(), m.end(), seeds)))
            pos = found[-1][1]
    for hint in _SHAPE_HINTS if len(text) >= _SHAPE_MIN else ():
        if hint in text:
            # the shapes run on the text as redact leaves it (a mask before a key is a boundary)
            filled = mask(text, found, fill=True) if found else text
            found = merge([*found, *(m.span() for m in _SHAPES.finditer(filled))])
            break
    return found


def merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ranges as one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def mask(text: str, ranges: Iterable[tuple[int, int]], *, fill: bool = False) -> str:
    """``text`` with each (sorted, disjoint) range replaced by ``***`` (``fill``: by as many ``*``)."""
    out: list[str] = []
    pos = 0
    for start, end in ranges:
        out += [text[pos:start], "*" * (end - start) if fill else MASK]
        pos = end
    return "".join(out) + text[pos:]


# -- logs -------------------------------------------------------------------------------------
_previous_factory = logging.getLogRecordFactory()


def _redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    """nb-agent's log records are redacted once, when made: whatever handler shows them."""
    record = _previous_factory(*args, **kwargs)
    if record.name.startswith("nb_agent"):
        try:
            record.msg, record.args = redact(record.getMessage()), None
        except Exception:  # a malformed call: leave it to logging's own error report
            return record
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    return record


if getattr(logging.getLogRecordFactory(), "__name__", "") != _redacting_factory.__name__:
    logging.setLogRecordFactory(_redacting_factory)

__all__ = [
    "MASK",
    "add",
    "add_headers",
    "add_names",
    "clear",
    "mask",
    "merge",
    "redact",
    "redactor",
    "scan",
    "spans",
]
