"""The one record type every reader returns and every pipeline stage consumes."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence as read from a file.

    Attributes:
      tokens: the tokens as the file gives them (PTB escapes such as `-LRB-` kept verbatim).
      text: the original untokenised text where the file has it, else " ".join(tokens).
      tree: a PTB bracket string when the source ships a constituency tree (SST, SNLI, PTB .mrg).
      binary_tree: SNLI's `*_binary_parse` (unlabelled binary bracketing), else None.
      heads: gold dependency heads, 1-based, 0 = root (CoNLL-U, .dp), else None.
      deprels: gold dependency labels aligned with tokens (None when the source has none).
      tags: gold POS tags (PTB / XPOS) aligned with tokens, else None.
    """

    tokens: tuple[str, ...]
    text: str = ""
    tree: str | None = None
    binary_tree: str | None = None
    heads: tuple[int, ...] | None = None
    deprels: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self.tokens)


@dataclasses.dataclass(frozen=True)
class Example:
    """One item of a task.

    Attributes:
      sentences: one sentence (classification, tagging) or two (pair tasks, STS).
      label: class index for classification tasks (0-based), else None.
      score: real-valued target (relatedness, STS gold), else None.
      fine_label: secondary label (TREC fine classes), else None.
      target: the output sentence of a sequence-to-sequence task (translation), else None.
      uid: where it came from, "file:line", used in every error message about it.
    """

    sentences: tuple[Sentence, ...]
    label: int | None = None
    score: float | None = None
    fine_label: int | None = None
    target: Sentence | None = None
    uid: str = ""
