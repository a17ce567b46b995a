"""``%agent_models``: local models from a notebook (``agent.models.manage``), as ``nb-agent models``
does it in a terminal; a pull's progress is tqdm's notebook widget (bytes, speed, time left).

The pull runs in the cell, as ``%pip install`` does: the kernel's interrupt stops it, and the
next pull of the same model resumes where it stopped. Errors are printed, never raised, so a
notebook run top to bottom (nbval, Run All) goes on, on the model it had.
"""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nb_agent.errors import NbAgentError


@magics_class
class ModelsMagics(Magics):
    @magic_arguments()
    @argument("verb", nargs="?", default="list", choices=("pull", "list", "rm", "info"), help="what to do (list)")
    @argument("name", nargs="?", help="a recommended name, hf:OWNER/REPO/FILE.gguf[@REVISION] or ollama:NAME[:TAG]")
    @argument("--recommended", action="store_true", help="list: also the table of recommended models")
    @line_magic
    def agent_models(self, line: str) -> None:
        """Pull, list, remove and describe local models (the Hugging Face Hub's GGUF files, or Ollama's)."""
        from nb_agent.agent.models import manage

        args = parse_argstring(self.agent_models, line)
        try:
            if args.verb == "list":
                print(manage.listing(recommended=args.recommended or not line.strip()))
                return
            if not args.name:
                print(f"nb-agent: %agent_models {args.verb} needs a model's name (see %agent_models)")
                return
            if args.verb == "pull":
                from tqdm.auto import tqdm

                manage.pull(args.name, bar=tqdm, say=print)
                print("New conversations (%agent --new) use the default above; a widget's Model picker lists it.")
            elif args.verb == "rm":
                print(manage.remove(args.name))
            else:
                print(manage.info(args.name))
        except (NbAgentError, ValueError) as exc:
            print(f"nb-agent: {exc}")
            if args.verb == "pull":
                from nb_agent.agent.models.default import choose_local

                chosen = choose_local()
                print(f"Not pulled. The built-in agent runs {chosen.name} ({chosen.why}), offline.")
