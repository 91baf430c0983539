"""Reading SWE-bench's files: instances (JSON list, JSON lines, Parquet; test lists as strings or
lists), predictions (list, dict, JSON lines), choosing instances, and the one-line errors."""

import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest

from codeloop.swebench.errors import InstanceFileError, PredictionsError, SpecError, UnknownInstance
from codeloop.swebench.instances import load_instances, select
from codeloop.swebench.predictions import builtin_predictions, load_predictions
from codeloop.swebench.specs import directives, load_extra_specs, spec_for
from tests.swebench import synthetic


def _rows() -> list[dict]:
    return synthetic.instances("0" * 40)


def test_an_instance_in_the_published_form_loads_with_its_test_lists_decoded(tmp_path: Path) -> None:
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(_rows()[1]) + "\n")  # test lists as JSON strings, as SWE-bench publishes
    (instance,) = load_instances(path)
    assert instance.instance_id == "synthetic__calc-2"
    assert instance.FAIL_TO_PASS == [
        "tests/test_neg.py::test_neg",
        "tests/test_neg.py::test_neg_over_network",
    ]
    assert instance.PASS_TO_PASS == []
    assert directives(instance) == ["tests/test_neg.py"]


@pytest.mark.parametrize("shape", ["jsonl", "list", "parquet", "lists"])
def test_every_file_shape_gives_the_same_instances(tmp_path: Path, shape: str) -> None:
    rows = _rows()
    path = tmp_path / f"instances.{'parquet' if shape == 'parquet' else 'json'}"
    if shape == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    elif shape == "list":
        path.write_text(json.dumps(rows))
    elif shape == "lists":  # test lists as lists, not JSON strings
        path.write_text(json.dumps([{**r, "FAIL_TO_PASS": json.loads(r["FAIL_TO_PASS"])} for r in rows]))
    else:
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), path)
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded] == ["synthetic__calc-1", "synthetic__calc-2"]
    assert loaded[1].FAIL_TO_PASS == [
        "tests/test_neg.py::test_neg",
        "tests/test_neg.py::test_neg_over_network",
    ]


def test_a_malformed_line_is_named_by_its_number(tmp_path: Path) -> None:
    rows = _rows()
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({**rows[1], "FAIL_TO_PASS": "[oops"}) + "\n")
    with pytest.raises(InstanceFileError, match=r"line 2: FAIL_TO_PASS: .*not a JSON list"):
        load_instances(path)
    path.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(InstanceFileError, match="line 2: not valid JSON"):
        load_instances(path)
    del rows[0]["base_commit"]
    path.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(InstanceFileError, match="line 1: base_commit: Field required"):
        load_instances(path)


def test_choosing_by_id_repo_and_sample(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()))
    instances = load_instances(path)
    assert [i.instance_id for i in select(instances, ids=["synthetic__calc-2"])] == ["synthetic__calc-2"]
    with pytest.raises(UnknownInstance, match="no instance nope"):
        select(instances, ids=["nope"])
    with pytest.raises(UnknownInstance, match="no instance of --repo a/b; the file has synthetic/calc"):
        select(instances, repo="a/b")
    once = select(instances, sample=1)
    assert len(once) == 1 and once == select(instances, sample=1)


@pytest.mark.parametrize("shape", ["list", "dict", "jsonl"])
def test_predictions_in_each_of_swebenchs_shapes(tmp_path: Path, shape: str) -> None:
    preds = [
        {"instance_id": "synthetic__calc-1", "model_name_or_path": "m", "model_patch": "diff"},
        {"instance_id": "synthetic__calc-2", "model_name_or_path": "m", "model_patch": ""},
    ]
    path = tmp_path / "preds.json"
    if shape == "list":
        path.write_text(json.dumps(preds))
    elif shape == "dict":
        path.write_text(json.dumps({p["instance_id"]: p for p in preds}))
    else:
        path.write_text("\n".join(json.dumps(p) for p in preds))
    loaded = load_predictions(path, known_ids={"synthetic__calc-1", "synthetic__calc-2"})
    assert loaded["synthetic__calc-1"].model_patch == "diff"
    assert loaded["synthetic__calc-2"].is_empty


def test_predictions_for_unknown_instances_or_without_a_patch_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"instance_id": "x", "model_name_or_path": "m", "model_patch": "d"}) + "\n")
    with pytest.raises(PredictionsError, match="instances file does not hold: x"):
        load_predictions(path, known_ids={"y"})
    path.write_text(json.dumps({"instance_id": "y", "model_name_or_path": "m"}) + "\n")
    with pytest.raises(PredictionsError, match="(line|item) 1: model_patch: Field required"):
        load_predictions(path, known_ids={"y"})


def test_gold_is_each_instances_own_patch_and_empty_is_no_change(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()))
    instances = load_instances(path)
    gold = builtin_predictions("gold", instances)
    assert gold["synthetic__calc-1"].model_patch == synthetic.GOLD_1
    assert all(p.is_empty for p in builtin_predictions("empty", instances).values())


def test_a_repository_swebench_lacks_needs_a_specs_file(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()))
    instance = load_instances(path)[0]
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps({"other/repo": {"1.0": {"python": "3.11"}}}))
    with pytest.raises(SpecError, match="other/repo 1.0: missing test_cmd"):
        load_extra_specs(specs)
    specs.write_text(json.dumps(synthetic.specs()))
    assert load_extra_specs(specs) == 1
    assert spec_for(instance)["test_cmd"] == "pytest -rA"
