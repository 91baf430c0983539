"""Candidate sources for `codeloop swebench --select`: several predictions files, each a source of
one candidate patch per instance, and the official labels a file may carry beside it.

A source is given as `PATH` (named by the file's stem, `coder-gpt4.jsonl` -> `coder-gpt4`) or
`NAME=PATH`. Its labels, when published, are `<stem>.labels.json` beside the file:
`{"resolved": [instance ids], ...}`; every other instance the file predicts is unresolved as the
official harness counted it (empty, not applying, or failing tests). Labels made by a third
party (`*.labels-unofficial.json`) are not read: they must not be mixed with official ones.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from codeloop.swebench.errors import PredictionsError
from codeloop.swebench.predictions import Prediction, load_predictions

LABELS_SUFFIX = ".labels.json"


@dataclass(frozen=True)
class Source:
    """One predictions file as a source of candidates."""

    name: str
    """The file's stem, or the NAME of `NAME=PATH`."""
    path: Path
    predictions: dict[str, Prediction]
    """By instance id, the empty ones included (they are no candidate)."""
    resolved: frozenset[str] | None
    """The instance ids the official harness resolved, from the labels file; None: no labels."""

    def candidate(self, instance_id: str) -> Prediction | None:
        """This source's non-empty patch for the instance, if any."""
        prediction = self.predictions.get(instance_id)
        return prediction if prediction is not None and not prediction.is_empty else None

    def label(self, instance_id: str) -> str | None:
        """`resolved` or `unresolved` as officially labelled; None without labels."""
        if self.resolved is None or instance_id not in self.predictions:
            return None
        return "resolved" if instance_id in self.resolved else "unresolved"


def parse_source(value: str) -> tuple[str, Path]:
    """`NAME=PATH` or `PATH` as (name, path).

    Raises:
        PredictionsError: a blank name or path.
    """
    name, sep, path = value.partition("=")
    if not sep:
        return Path(value).stem or value, Path(value)
    if not name.strip() or not path.strip():
        raise PredictionsError(f"--predictions {value!r}: give NAME=PATH or a path")
    return name.strip(), Path(path)


def load_sources(values: list[str], *, known_ids: set[str]) -> list[Source]:
    """Every `--predictions` of a `--select` run, in the order given.

    Raises:
        PredictionsError: a file that is missing or malformed (`load_predictions`), two sources of
            one name, a labels file that is not `{"resolved": [...]}`.
    """
    sources: list[Source] = []
    for value in values:
        name, path = parse_source(value)
        if any(s.name == name for s in sources):
            raise PredictionsError(f"--predictions: two sources named {name!r}; name one NAME=PATH")
        if not path.is_file():
            raise PredictionsError(f"--predictions {path}: no such file")
        predictions = load_predictions(path, known_ids=known_ids)
        sources.append(Source(name, path, predictions, _labels(path)))
    return sources


def _labels(path: Path) -> frozenset[str] | None:
    labels = path.with_name(path.stem + LABELS_SUFFIX)
    if not labels.is_file():
        return None
    try:
        data = json.loads(labels.read_text(encoding="utf-8"))
        resolved = data["resolved"]
        if not isinstance(resolved, list):
            raise TypeError("resolved is not a list")
        return frozenset(str(i) for i in resolved)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PredictionsError(f'{labels}: not a labels file ({{"resolved": [ids]}}): {exc}') from None
