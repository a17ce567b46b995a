"""``nb-agent models pull | list | rm | info``: local models from the terminal (``agent.models.manage``),
with tqdm's progress bar on stderr (bytes, speed, time left)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    models = sub.add_parser("models", help="local models: pull one (Hugging Face Hub or Ollama), list, rm, info")
    verbs = models.add_subparsers(dest="verb", required=True)
    pull = verbs.add_parser(
        "pull", help="download a model: a recommended name, hf:OWNER/REPO/FILE.gguf[@REV] or ollama:NAME[:TAG]"
    )
    pull.add_argument("name")
    listed = verbs.add_parser("list", help="the downloaded models (size, where) and the one the agent runs")
    listed.add_argument("--recommended", action="store_true", help="also the table of recommended models")
    verbs.add_parser("rm", help="delete a downloaded model").add_argument("name")
    verbs.add_parser("info", help="what a model is: size, RAM, licence, where").add_argument("name")


def run(args: argparse.Namespace) -> int:
    from nb_agent.agent.models import manage

    def say(text: str) -> None:
        print(text, flush=True)

    if args.verb == "pull":
        from tqdm import tqdm

        manage.pull(args.name, bar=tqdm, say=say)
    elif args.verb == "list":
        say(manage.listing(recommended=args.recommended))
    elif args.verb == "rm":
        say(manage.remove(args.name))
    else:
        say(manage.info(args.name))
    sys.stdout.flush()
    return 0
