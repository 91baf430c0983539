"""The repository's own checks (`scripts/`, run by `make lint`) on small planted files."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_a_long_function_and_a_long_parameter_list_are_offences_and_a_typer_command_is_exempt(
    tmp_path: Path,
) -> None:
    sizes = _script("check_sizes")
    body = "".join(f"    x{i} = {i}\n" for i in range(120))
    params = ", ".join(f"p{i}" for i in range(11))
    source = tmp_path / "planted.py"
    source.write_text(
        f"def long():\n{body}\n\n"
        f"def many({params}):\n    pass\n\n\n"
        f"@app.command()\ndef command({params}):\n    pass\n\n\n"
        f"@with_option_groups\ndef grouped({params}):\n    pass\n\n\n"
        f"class C:\n    def method(self, {', '.join(f'p{i}' for i in range(10))}):\n        pass\n"
    )
    found = {(o.name, o.what) for o in sizes.check_file(source, tmp_path)}
    assert found == {("long", "121 lines (at most 120)"), ("many", "11 parameters (at most 10)")}


def test_an_ignore_without_a_rule_or_a_reason_is_reported(tmp_path: Path) -> None:
    ignores = _script("check_ignores")
    source = tmp_path / "planted.py"
    source.write_text(
        "a = 1  # type: ignore\n"
        "b = 2  # type: ignore[attr-defined]\n"
        "c = 3  # pyright: ignore[reportArgumentType] - the value is checked by pydantic\n"
        "d = '# type: ignore in a string is not a comment'\n"
    )
    assert [line for line, _ in ignores.bare_ignores(source)] == [1, 2]


def test_an_import_cycle_through_two_folders_is_reported_and_one_inside_a_folder_is_not(
    tmp_path: Path,
) -> None:
    """Our rule (scripts/check_cycles.py): modules of two packages never need each other, even
    through a lazy import inside a function; two modules of one package may."""
    cycles = _script("check_cycles")
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "import pkg.a\n",
        "pkg/root/__init__.py": "",
        "pkg/root/serve.py": "from pkg.feature.worker import run\n",
        "pkg/feature/__init__.py": "",
        "pkg/feature/worker.py": "def run():\n    from pkg.feature import solve\n",
        "pkg/feature/solve.py": "def solve():\n    from ..root.serve import x\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = cycles.tangles(tmp_path, ("pkg",))
    assert [str(t) for t in found] == [
        "import cycle across pkg.feature, pkg.root: "
        "pkg.feature.solve -> pkg.root.serve -> pkg.feature.worker -> pkg.feature.solve"
    ]


def test_annotations_that_mention_any_are_counted_once_each_and_a_ceiling_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Our check (`make lint`): the count of annotations saying `Any` only goes down."""
    count_any = _script("count_any")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "planted.py").write_text(
        "import typing\n"
        "import typing as t\n"
        "from typing import Any, Literal\n\n"
        "def f(a: Any, b: dict[str, Any], *args: 't.Any', c: int, **kw: object) -> typing.Any:\n"
        "    x: list[Any] = []\n"
        "    y: Literal['Any'] = 'Any'\n"
        "    return x\n\n"
        "class C:\n"
        "    field: 'dict[str, Any] | None' = None\n"
        "    other: int = 0\n"
    )
    (tmp_path / "top.py").write_text("from typing import Any\n\nVALUE: Any = 1\n")
    ignored = tmp_path / ".venv" / "lib"
    ignored.mkdir(parents=True)
    (ignored / "vendored.py").write_text("from typing import Any\n\ndef g(a: Any) -> Any: ...\n")

    assert count_any.count_file(package / "planted.py") == 6
    assert count_any.count_tree(tmp_path) == {"pkg": 6, ".": 1}
    assert count_any.main(["--root", str(tmp_path), "--max", "7"]) == 0
    assert "     7  total" in capsys.readouterr().out
    assert count_any.main(["--root", str(tmp_path), "--max", "6"]) == 1
    assert "over the ceiling of 6" in capsys.readouterr().err
