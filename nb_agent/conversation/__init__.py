"""The run controller: one conversation with an agent, run the same way from every front end.

Between connecting (``nb_agent.connect``) and the front ends (``nb_agent.ui``: the widget and the
magics; ``nb_agent.cli``: ``nb-agent stream``): a conversation's turns and its one approval path
(``controller``), what a run produced (``result``), its picks and a line's options (``picks``), a run
recorded and replayed (``replay``, ``recordings``, ``replay_client``, ``replay_file``), usage metered
into the ledger (``usage``), the admin's policy checked (``policy_check``), the events kept compacted
(``log``), the model a turn will use said (``describe``).
"""
