"""A model's text preprocessing without torch: its fast tokenizer, replayed from `tokenizer.json`.

Why: importing sentence-transformers (and torch under it) costs seconds of CPU, most of a
`codeloop search` call. Once a model is converted for OpenVINO, encoding needs only token ids, so the
converted model is saved with its tokenizer and this module feeds it. It is used only where a
probe at conversion time showed it gives exactly the arrays `SentenceTransformer.preprocess`
gives (models with prompts, chat templates or extra inputs keep the full path).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from tokenizers import Encoding

RECIPE_FILE = "preprocessing.json"
TOKENIZER_FILE = "tokenizer.json"
_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
_PROBE = [
    "def probe(value: int) -> int:\n    return value * 2",
    "Find where the HTTP client retries a request",
    "  indented\ttabs\tand   spaces, UPPER and lower, ünïcödé, 数字 123 ",
    "",
    "x " * 400,
]


@dataclass(frozen=True)
class Recipe:
    """What the saved tokenizer needs to reproduce the model's inputs."""

    inputs: tuple[str, ...]
    """Input names in the converted model's order."""
    max_tokens: int
    """The model's own token cap (a smaller one may be applied per encoder)."""
    dimension: int
    pad_id: int
    pad_type_id: int
    pad_left: bool


class SavedTokenizer:
    """Tokenizes like the model's own fast tokenizer, capped at `max_tokens`, padding per batch."""

    def __init__(self, directory: Path, recipe: Recipe, max_tokens: int) -> None:
        from tokenizers import Tokenizer

        self.recipe = recipe
        self.max_tokens = max_tokens
        self._tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens, strategy="longest_first")

    def encode(self, texts: list[str]) -> "list[Encoding]":
        """One encoding per text (ids, type ids, mask), truncated, unpadded."""
        return self._tokenizer.encode_batch(texts)

    def lengths(self, encodings: "list[Encoding]") -> np.ndarray:
        """Tokens per encoding, for length batching."""
        return np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))

    def batch(self, encodings: "list[Encoding]") -> dict[str, np.ndarray]:
        """The model's input arrays for `encodings`, padded to the longest of them."""
        width = max(len(e.ids) for e in encodings)
        arrays = {
            "input_ids": np.full((len(encodings), width), self.recipe.pad_id, dtype=np.int64),
            "token_type_ids": np.full((len(encodings), width), self.recipe.pad_type_id, dtype=np.int64),
            "attention_mask": np.zeros((len(encodings), width), dtype=np.int64),
        }
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            cols = slice(width - n, width) if self.recipe.pad_left else slice(0, n)
            arrays["input_ids"][row, cols] = encoding.ids
            arrays["token_type_ids"][row, cols] = encoding.type_ids
            arrays["attention_mask"][row, cols] = encoding.attention_mask
        return {name: arrays[name] for name in self.recipe.inputs}


def save_if_faithful(model: "SentenceTransformer", inputs: list[str], directory: Path) -> bool:
    """Save the tokenizer and recipe of `model` into `directory` if replaying them gives exactly
    `model.preprocess`'s arrays on a probe (at the model's cap and a small one); else save nothing."""
    backend = getattr(model.tokenizer, "backend_tokenizer", None)
    if backend is None or any(name not in _INPUTS for name in inputs):
        return False
    tokenizer = model.tokenizer
    recipe = Recipe(
        inputs=tuple(inputs),
        max_tokens=int(model.max_seq_length),  # pyright: ignore[reportArgumentType] - sentence-transformers' optional ints are set for the models we load
        dimension=int(model.get_embedding_dimension()),  # pyright: ignore[reportArgumentType] - sentence-transformers' optional ints are set for the models we load
        pad_id=int(tokenizer.pad_token_id or 0),
        pad_type_id=int(getattr(tokenizer, "pad_token_type_id", 0) or 0),
        pad_left=tokenizer.padding_side == "left",
    )
    backend.save(str(directory / TOKENIZER_FILE))
    for cap in (recipe.max_tokens, 8):
        replay = SavedTokenizer(directory, recipe, cap)
        expected = model.preprocess(_PROBE, max_length=cap)
        got = replay.batch(replay.encode(_PROBE))
        if any(not np.array_equal(got[name], expected[name].numpy()) for name in inputs):
            (directory / TOKENIZER_FILE).unlink()
            return False
    (directory / RECIPE_FILE).write_text(json.dumps(recipe.__dict__))
    return True


def load_recipe(directory: Path) -> Recipe | None:
    """The saved recipe, or None if there is none (or it is unreadable: the full path is used)."""
    try:
        raw = json.loads((directory / RECIPE_FILE).read_text())
        raw["inputs"] = tuple(raw["inputs"])
        return Recipe(**raw)
    except (OSError, ValueError, TypeError, KeyError):
        return None
