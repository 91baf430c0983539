"""Predictions in SWE-bench's format: `instance_id`, `model_name_or_path`, `model_patch`.

A file holds a JSON list of them, a JSON object keyed by instance id, or JSON lines. `gold`
stands for each instance's own patch (validating the environments), `empty` for no change at all
(each instance's test patch alone, which should resolve none).
"""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from codeloop.swebench.errors import PredictionsError
from codeloop.swebench.instances import Instance

GOLD = "gold"
EMPTY = "empty"


class Prediction(BaseModel):
    """One model's patch for one instance, as SWE-bench's harness reads it."""

    model_config = ConfigDict(frozen=True, extra="allow")

    instance_id: str
    model_name_or_path: str
    model_patch: str | None
    """A unified diff; None or "" is an empty prediction (the official harness does not run it)."""

    @property
    def is_empty(self) -> bool:
        return not self.model_patch


def builtin_predictions(kind: str, instances: list[Instance]) -> dict[str, Prediction]:
    """`gold` (each instance's own patch) or `empty` (no change) for every instance."""
    return {
        i.instance_id: Prediction(
            instance_id=i.instance_id,
            model_name_or_path=kind,
            model_patch=i.patch if kind == GOLD else "",
        )
        for i in instances
    }


def load_predictions(path: Path, *, known_ids: set[str]) -> dict[str, Prediction]:
    """The predictions of `path`, keyed by instance id.

    Raises:
        PredictionsError: the file cannot be read, is not one of the three shapes, a prediction
            lacks a field, an instance is predicted twice, or an id is in no instance of the file
            (as the official harness refuses it).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionsError(f"cannot read the predictions file {path}: {exc}") from None
    items = _items(path, text)
    predictions: dict[str, Prediction] = {}
    for where, item in items:
        try:
            prediction = Prediction.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "prediction"
            raise PredictionsError(f"{path}: {where}: {field}: {first['msg']}") from None
        if prediction.instance_id in predictions:
            raise PredictionsError(f"{path}: {where}: {prediction.instance_id} is predicted twice")
        predictions[prediction.instance_id] = prediction
    unknown = sorted(set(predictions) - known_ids)
    if unknown:
        raise PredictionsError(
            f"{path}: predictions for instances the instances file does not hold: {', '.join(unknown[:5])}"
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        )
    return predictions


def _items(path: Path, text: str) -> list[tuple[str, JsonValue]]:
    stripped = text.lstrip()
    if stripped.startswith("[") or stripped.startswith("{") and _is_whole_json(stripped):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PredictionsError(f"{path}: not valid JSON: {exc}") from None
        if isinstance(data, list):
            return [(f"item {i}", item) for i, item in enumerate(data, 1)]
        if "instance_id" in data:  # one prediction alone (also one line of JSON lines)
            return [("item 1", data)]
        return [
            (f"key {key}", {"instance_id": key, **item} if isinstance(item, dict) else item)
            for key, item in data.items()
        ]
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append((f"line {number}", json.loads(line)))
            except ValueError as exc:
                raise PredictionsError(f"{path}: line {number}: not valid JSON: {exc}") from None
    return items


def _is_whole_json(text: str) -> bool:
    """True when `text` is one JSON document (a dict file), not JSON lines that start with `{`."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def write_predictions(path: Path, predictions: list[Prediction]) -> None:
    """Write `predictions` as JSON lines, atomically (a reader never sees half a file)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("".join(p.model_dump_json() + "\n" for p in predictions), encoding="utf-8")
    partial.replace(path)
