"""What an A2A client has shown of one artifact, so a replacement or a resubscribe snapshot of it
adds only what is new (``nb_agent.protocols.a2a.decode``, "Artifacts")."""

from __future__ import annotations


class Block:
    """What was shown of one artifact: its text (as chunks, joined only to compare), its other parts."""

    __slots__ = ("chunks", "matching", "others", "replayed")

    def __init__(self) -> None:
        self.chunks: list[str] = []  # the streamed answer appends to it directly (``A2AMapper.appended_text``)
        self.others = 0
        # The last text parts of a resubscribe snapshot: a2a-sdk taps the live queue before it
        # reads the snapshot, so chunks in flight then arrive twice (never zero times).
        self.replayed: list[str] | None = None
        self.matching = False

    def seen_in_snapshot(self, text: str) -> bool:
        """Is this live appended chunk a re-delivery of the snapshot's last parts, in order?"""
        window = self.replayed
        if window is None:
            return False
        if not self.matching:
            # The shortest run that explains the chunk: fewest skips if text repeats.
            idx = max((i for i, part in enumerate(window) if part == text), default=None)
            if idx is None:
                self.replayed = None
                return False
            self.replayed, self.matching = window[idx + 1 :], True
            return True
        if window and window[0] == text:
            self.replayed = window[1:]
            return True
        self.replayed = None
        return False

    def text(self) -> str:
        return "".join(self.chunks)

    def add(self, text: str) -> None:
        self.chunks.append(text)

    def replace(self, text: str) -> None:
        self.chunks[:] = [text]
