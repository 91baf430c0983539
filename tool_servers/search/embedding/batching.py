"""Batches of texts of similar token length: each batch is padded to its longest member, so
batches of near-equal lengths waste least compute on padding."""

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def length_batches(lengths: np.ndarray, *, max_size: int, min_ratio: float) -> list[np.ndarray]:
    """Indices into `lengths`, longest first, cut into batches of at most `max_size` whose members
    are all at least `min_ratio` of the batch's longest. Every index appears exactly once."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for pos in range(1, len(order) + 1):
        if (
            pos == len(order)
            or pos - start == max_size
            or lengths[order[pos]] < min_ratio * lengths[order[start]]
        ):
            batches.append(order[start:pos])
            start = pos
    return batches


def token_lengths(
    model: "SentenceTransformer", texts: list[str], *, max_length: int | None = None
) -> np.ndarray:
    """Tokens each text gives the model after the cap (`max_length`, default the model's own),
    special tokens included."""
    cap = max_length or model.max_seq_length
    encoded = model.tokenizer(texts, truncation=True, max_length=cap, add_special_tokens=True)["input_ids"]
    return np.fromiter((len(ids) for ids in encoded), dtype=np.int64, count=len(texts))
