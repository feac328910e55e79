"""A caveat: something that makes a merged run less than complete (``report.caveats`` says which)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Caveat:
    """Something that makes the run less than complete; ``kind`` is a stable identifier."""

    kind: str
    message: str
    workers: list[str] = field(default_factory=list)
