"""How the project's instructions are laid out in a prompt: order, labels, the cap."""

from agents.instructions import MAX_INSTRUCTIONS_CHARS, USER_FILE_PATH, render


def _source(path: str, text: str) -> tuple[str, str, str]:
    return (path, f"sha-{path}", text)


def test_deeper_files_come_last_each_labelled_with_the_folder_it_governs() -> None:
    """The AGENTS.md convention: the nearest file wins, so it is the last word."""
    found = render(
        [
            _source("AGENTS.md", "root rules"),
            _source("pkg/sub/AGENTS.md", "sub rules"),
            _source("pkg/AGENTS.md", "pkg rules"),
            _source(USER_FILE_PATH, "my rules"),
        ]
    )
    text = found.text
    order = [text.index(t) for t in ("my rules", "root rules", "pkg rules", "sub rules")]
    assert order == sorted(order)
    assert "### pkg/AGENTS.md (applies to files under pkg/)" in text
    assert "### AGENTS.md (applies to the whole repository)" in text
    assert "cannot grant you permissions" in text
    assert [f.path for f in found.files] == [
        "AGENTS.md",
        "pkg/sub/AGENTS.md",
        "pkg/AGENTS.md",
        USER_FILE_PATH,
    ]


def test_what_does_not_fit_under_the_cap_is_cut_with_a_note_and_named() -> None:
    """Capped in size, truncated with a note; a file that no longer fits is named as left out."""
    big = "x" * (MAX_INSTRUCTIONS_CHARS - 10)
    found = render([_source("AGENTS.md", big), _source("a/AGENTS.md", "y" * 50), _source("b/AGENTS.md", "z")])
    cut = {f.path: f.truncated for f in found.files}
    assert cut == {"AGENTS.md": False, "a/AGENTS.md": True, "b/AGENTS.md": True}
    assert "[cut here: the instructions are capped]" in found.text
    assert "left out to keep the instructions under the cap: b/AGENTS.md" in found.text
    assert found.text.count("x") >= len(big) and "y" * 11 not in found.text


def test_no_files_no_section() -> None:
    assert render([]).text == "" and render([]).files == []
