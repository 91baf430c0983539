"""The stat fingerprint that tells a long-lived index to update: it covers every file the indexer
reads, through the same walk, so an edit the index would see is never missed."""

from pathlib import Path

from tool_servers.search.index.files import SourceFile, walk_repo
from tool_servers.search.index.freshness import tree_fingerprint

TREE = {
    ".gitignore": "*.log\nbuild_out/\n",
    "app.py": "a = 1\n",
    "run.log": "ignored one by one: still fingerprinted, at the cost of a no-op update\n",
    "build_out/gen.py": "pruned\n",
    "node_modules/m.js": "pruned\n",
    "docs/.gitignore": "*\n!*/\n!*.md\n",
    "docs/api/index.md": "# API\n",
    "pkg/.gitignore": "!keep.log\n",
    "pkg/keep.log": "re-included by the nested .gitignore\n",
}


def _tree(root: Path) -> None:
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_fingerprint_covers_every_file_the_indexer_reads_and_no_pruned_directory(tmp_path: Path) -> None:
    _tree(tmp_path)
    fingerprinted = {path for path, *_ in tree_fingerprint(tmp_path)}
    indexed = {f.path for f in walk_repo(tmp_path) if isinstance(f, SourceFile)}
    assert indexed <= fingerprinted
    assert "docs/api/index.md" in fingerprinted  # `*` then `!*/`: git enters docs/api, so do both
    assert "run.log" in fingerprinted
    assert not any(p.startswith(("build_out/", "node_modules/")) for p in fingerprinted)


def test_an_edit_under_a_re_included_directory_changes_the_fingerprint(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = tree_fingerprint(tmp_path)
    (tmp_path / "docs/api/index.md").write_text("# API, edited\n")
    assert tree_fingerprint(tmp_path) != before


def test_a_skipped_directory_changes_nothing(tmp_path: Path) -> None:
    _tree(tmp_path)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    before = tree_fingerprint(tmp_path, skip=[index_dir])
    (index_dir / "lock").write_text("changes on every update\n")
    assert tree_fingerprint(tmp_path, skip=[index_dir]) == before
    assert tree_fingerprint(tmp_path) != before
