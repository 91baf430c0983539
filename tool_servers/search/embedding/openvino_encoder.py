"""The index's fast encoder: a sentence-transformers model run by OpenVINO on the CPU.

Why: the model is nearly all of a full index's time, and OpenVINO runs the bundled
all-MiniLM-L6-v2 faster on the CPU than torch with bfloat16 weights and token-length batches, on
the same chunks, with vectors closer to the plain float32 model's (`benchmarks/index_bench.py`
prints the rates and the cosine agreement side by side). Settings: bfloat16 inference where the
CPU has it; OpenVINO's THROUGHPUT hint, which on a few cores runs several single-threaded streams
fed by an asynchronous request queue (this model's matrices are too small to keep two threads of
one stream busy); batches of at most 32 texts within 90 % of the batch's longest (a looser ratio
pads more, larger batches wait longer for their longest member).

The model is converted once from the loaded sentence-transformers pipeline (every module, so
any pooling, dense or normalize layers a user's model has are included), with dynamic batch and
sequence axes, and saved as OpenVINO IR under the cache directory keyed by the model's files and
the OpenVINO version (float32 weights), with the model's tokenizer where it reproduces the
pipeline's inputs exactly (`saved_tokenizer`); later loads read the IR (no tracing) and compile
it. OpenVINO's compiled-blob cache is not used: it would save a small part of the compile for a
second copy of the model's size on disk.

Offline: importing `openvino` sends a usage event to Google Analytics from a forked process
unless the user opted out or a CI variable is set (`openvino/tools/ovc/__init__.py`). Every
telemetry import there falls back to a stub on ImportError, so `_import_openvino` blocks the
`openvino_telemetry` module before importing openvino: nothing is sent, nothing is forked.
"""

import contextlib
import functools
import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

import numpy as np

from tool_servers.search.embedding.batching import length_batches, token_lengths
from tool_servers.search.embedding.saved_tokenizer import (
    Recipe,
    SavedTokenizer,
    load_recipe,
    save_if_faithful,
)
from tool_servers.search.errors import SearchError

if TYPE_CHECKING:
    import torch
    from openvino import CompiledModel, Core, InferRequest
    from sentence_transformers import SentenceTransformer
    from tokenizers import Encoding

BATCH_SIZE = 32
MIN_LENGTH_RATIO = 0.9
KEEP_CONVERTED = 4
"""Converted models kept in the cache (87 MB each for the bundled one); converting another drops
the least recently used beyond this, so upgrades of a model or of OpenVINO do not pile up."""
_IR_FILE = "model.xml"


class OpenVinoUnavailable(SearchError):
    """OpenVINO is not installed or cannot convert this model; the caller falls back to torch."""


Item = TypeVar("Item")
"""What a preprocessor makes of one text before batching: a tokenizer's encoding, or the text."""


class Preprocessor(Protocol[Item]):
    """Texts to model inputs: `encode` once per text, `lengths` for batching, `batch` to arrays."""

    def encode(self, texts: list[str], /) -> list[Item]: ...

    def lengths(self, items: list[Item], /) -> np.ndarray: ...

    def batch(self, items: list[Item], /) -> dict[str, np.ndarray]: ...


class OpenVinoEncoder(Generic[Item]):
    """Runs one converted model; `encode` calls from several threads take turns (one request queue).

    `preprocessor` turns texts into the model's input arrays, already capped (`SavedTokenizer`,
    or `_PipelinePreprocessor` over the sentence-transformers model, which it never runs).
    """

    def __init__(self, compiled: "CompiledModel", preprocessor: Preprocessor[Item], dimension: int) -> None:
        _import_openvino()
        import openvino as ov

        self._compiled = compiled
        self._preprocessor = preprocessor
        self.dimension = dimension
        self._output = compiled.outputs[0]
        requests = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._queue = ov.AsyncInferQueue(compiled, max(1, requests))
        self._queue.set_callback(self._store)
        self._out: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def precision(self) -> Literal["float32", "bfloat16"]:
        hint = str(self._compiled.get_property("INFERENCE_PRECISION_HINT"))
        return "bfloat16" if "bf16" in hint or "bfloat16" in hint else "float32"

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts` in order, float32, as the model's last module leaves them."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        # Tokenizing inside the lock too: Hugging Face tokenizers set their truncation per call and
        # raise "Already borrowed" when two threads do that at once.
        with self._lock:
            items = self._preprocessor.encode(texts)
            lengths = self._preprocessor.lengths(items)
            self._out = out
            try:
                for idx in length_batches(lengths, max_size=BATCH_SIZE, min_ratio=MIN_LENGTH_RATIO):
                    self._queue.start_async(self._preprocessor.batch([items[i] for i in idx]), idx)
            finally:
                # Requests already started write into `out`: let them finish before it is let go.
                self._queue.wait_all()
                self._out = None
        return out

    def _store(self, request: "InferRequest", idx: np.ndarray) -> None:
        # Runs on an OpenVINO thread; each request writes only its own rows.
        assert self._out is not None
        self._out[idx] = request.get_tensor(self._output).data


class _PipelinePreprocessor:
    """Preprocessing by the loaded sentence-transformers model (for models whose tokenizer could
    not be saved faithfully), capped at `max_tokens`: tokenizes twice, for lengths and per batch."""

    def __init__(self, model: "SentenceTransformer", inputs: list[str], max_tokens: int | None) -> None:
        self._model = model
        self._inputs = inputs
        self._cap = min(max_tokens or model.max_seq_length, model.max_seq_length)  # pyright: ignore[reportArgumentType] - the models we load declare max_seq_length

    def encode(self, texts: list[str]) -> list[str]:
        return texts

    def lengths(self, items: list[str]) -> np.ndarray:
        return token_lengths(self._model, items, max_length=self._cap)

    def batch(self, items: list[str]) -> dict[str, np.ndarray]:
        features = self._model.preprocess(items, max_length=self._cap)
        return {name: features[name].numpy() for name in self._inputs}


def saved_recipe(*, source: str, name: str, cache_dir: Path) -> Recipe | None:
    """The preprocessing recipe saved with the converted model, if both are there: then
    `load_encoder` runs without the sentence-transformers model (and without importing torch)."""
    try:
        _import_openvino()
        import openvino as ov
    except ImportError:
        return None
    ir_dir = cache_dir / _ir_key(source, name, ov.get_version())
    return load_recipe(ir_dir) if (ir_dir / _IR_FILE).is_file() else None


def load_encoder(
    model: "SentenceTransformer | None",
    *,
    source: str,
    name: str,
    precision: Literal["auto", "float32", "bfloat16"],
    cache_dir: Path,
    max_tokens: int | None,
) -> "OpenVinoEncoder[Encoding] | OpenVinoEncoder[str]":
    """An encoder for the model loaded from `source`, known as `name`, reading at most
    `max_tokens` (None: the model's own cap). It converts `model` on first use; with `model`
    None it needs the converted model and a saved tokenizer (`saved_recipe`).

    Raises:
        OpenVinoUnavailable: openvino is not importable; the model cannot be converted or
            compiled; or `model` is None and what is saved does not suffice.
    """
    try:
        _import_openvino()
        import openvino as ov
    except ImportError as exc:
        raise OpenVinoUnavailable(f"openvino is not installed: {exc}") from exc
    core = _core()
    if precision == "auto":
        capabilities = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        precision = "bfloat16" if "BF16" in capabilities else "float32"
    ir_dir = cache_dir / _ir_key(source, name, ov.get_version())
    config = {
        "INFERENCE_PRECISION_HINT": "bf16" if precision == "bfloat16" else "f32",
        # Picks the streams for the machine's cores: single-threaded streams, one per core on a
        # small machine, suit this model's small matrices.
        "PERFORMANCE_HINT": "THROUGHPUT",
    }
    with _convert_lock:
        converted_now = not (ir_dir / _IR_FILE).is_file()
        if converted_now:
            if model is None:
                raise OpenVinoUnavailable(f"{name} is not converted for OpenVINO yet")
            _convert(model, ir_dir)
        try:
            compiled = _compile(core, ir_dir, config, name)
        except OpenVinoUnavailable:
            if converted_now or model is None:
                raise
            # A cached IR that does not load (truncated by a full disk, edited): convert again.
            shutil.rmtree(ir_dir, ignore_errors=True)
            _convert(model, ir_dir)
            compiled = _compile(core, ir_dir, config, name)
        recipe = load_recipe(ir_dir)
        _touch(ir_dir)
        if converted_now:
            _prune(cache_dir, keep=ir_dir)
    inputs = [port.get_any_name() for port in compiled.inputs]
    if recipe is not None and list(recipe.inputs) == inputs:
        cap = min(max_tokens or recipe.max_tokens, recipe.max_tokens)
        try:
            tokenizer = SavedTokenizer(ir_dir, recipe, cap)
        except Exception as exc:  # tokenizers raises bare Exception for a missing or bad file
            raise OpenVinoUnavailable(f"the saved tokenizer of {name} does not load: {exc}") from exc
        return OpenVinoEncoder(compiled, tokenizer, recipe.dimension)
    if model is None:
        raise OpenVinoUnavailable(f"{name} needs its sentence-transformers pipeline to preprocess text")
    preprocessor = _PipelinePreprocessor(model, inputs, max_tokens)
    return OpenVinoEncoder(compiled, preprocessor, int(model.get_embedding_dimension()))  # pyright: ignore[reportArgumentType] - sentence-transformers' optional ints are set for the models we load


_convert_lock = threading.Lock()
_core_lock = threading.Lock()
_core_instance: "Core | None" = None


def _core() -> "Core":
    global _core_instance
    with _core_lock:
        if _core_instance is None:
            _import_openvino()
            import openvino as ov

            _core_instance = ov.Core()
        return _core_instance


def _import_openvino() -> None:
    """Import openvino (ImportError when it is not installed) before any `import openvino`."""
    # Blocks the telemetry package (module docstring) unless something imported it before us.
    if "openvino" not in sys.modules:
        sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type] - None in sys.modules makes importing the module fail, on purpose
    importlib.import_module("openvino")


@functools.lru_cache(maxsize=16)
def _ir_key(source: str, name: str, version: str) -> str:
    """Names the converted model by what it was converted from: the model's files (size and
    modification time) and the OpenVINO version, so an upgraded model or runtime converts again.
    Memoised: a load asks twice (`saved_recipe`, then `load_encoder`), and a process does not see
    its model upgraded under it."""
    digest = hashlib.sha256(f"{name}\0{version}\0".encode())
    root = Path(source)
    if root.is_dir():
        for file in sorted(root.rglob("*")):
            if file.is_file():
                stat = file.stat()
                digest.update(
                    f"{file.relative_to(root).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode()
                )
    return digest.hexdigest()[:24]


def _compile(core: "Core", ir_dir: Path, config: dict[str, str], name: str) -> "CompiledModel":
    try:
        return core.compile_model(str(ir_dir / _IR_FILE), "CPU", config)
    except RuntimeError as exc:
        raise OpenVinoUnavailable(f"OpenVINO cannot compile {name}: {exc}") from exc


def _touch(ir_dir: Path) -> None:
    # The directory's modification time marks its last use, for `_prune`.
    with contextlib.suppress(OSError):
        os.utime(ir_dir)


def _prune(cache_dir: Path, *, keep: Path) -> None:
    """Drop converted models beyond `KEEP_CONVERTED`, least recently used first. A process still
    compiling one of them fails to, and converts again (or falls back to the full load)."""
    try:
        converted = [
            d
            for d in cache_dir.iterdir()
            # ".name-*" directories are other processes' conversions in progress.
            if d.is_dir() and d != keep and not d.name.startswith(".") and (d / _IR_FILE).is_file()
        ]
        converted.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for stale in converted[KEEP_CONVERTED - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)


def _convert(model: "SentenceTransformer", ir_dir: Path) -> None:
    """Trace every module of `model` and save the IR into `ir_dir` atomically (a concurrent
    process converting the same model either wins the rename or finds it done)."""
    import torch

    _import_openvino()
    import openvino as ov
    from openvino.frontend import FrontEndManager
    from openvino.frontend.pytorch.ts_decoder import TorchScriptPythonDecoder

    example = model.preprocess(["def example(value):\n    return value", "an example sentence"])
    names = [key for key, value in example.items() if isinstance(value, torch.Tensor)]
    constants = {key: value for key, value in example.items() if not isinstance(value, torch.Tensor)}
    graph = _traceable(list(model.children()), names, constants)
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            # Tracing warns about Python control flow on shapes; the axes are left dynamic below.
            warnings.simplefilter("ignore")
            decoder = TorchScriptPythonDecoder(graph, example_input=tuple(example[name] for name in names))
            frontend = FrontEndManager().load_by_framework("pytorch")
            converted = frontend.convert(frontend.load(decoder))
        for port, name in zip(converted.inputs, names, strict=True):
            port.get_tensor().set_names({name})
        converted.reshape({port.get_any_name(): ov.PartialShape([-1, -1]) for port in converted.inputs})
    except Exception as exc:  # the frontend raises its own exception types for unsupported ops
        raise OpenVinoUnavailable(f"OpenVINO cannot convert this model: {type(exc).__name__}: {exc}") from exc
    try:
        ir_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{ir_dir.name}-", dir=ir_dir.parent))
    except OSError as exc:
        raise OpenVinoUnavailable(f"cannot save the converted model under {ir_dir.parent}: {exc}") from exc
    try:
        ov.save_model(converted, str(staging / _IR_FILE), compress_to_fp16=False)
        save_if_faithful(model, names, staging)
        try:
            os.rename(staging, ir_dir)
        except OSError:
            if not (ir_dir / _IR_FILE).is_file():
                raise
    except (OSError, RuntimeError) as exc:
        raise OpenVinoUnavailable(f"cannot save the converted model to {ir_dir}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _traceable(
    modules: "list[torch.nn.Module]", names: list[str], constants: dict[str, object]
) -> "torch.nn.Module":
    """The sentence-transformers modules in order as one module taking tensors positionally
    (what tracing needs); `constants` are the non-tensor features, e.g. `modality`."""
    import torch

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stages = torch.nn.ModuleList(modules)

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            features: dict[str, object] = dict(zip(names, tensors, strict=True)) | constants
            for stage in self.stages:
                features = stage(features)
            embedding = features["sentence_embedding"]
            if not isinstance(embedding, torch.Tensor):  # what every sentence-transformers model ends with
                raise TypeError(f"the model's last module gave {type(embedding).__name__}, not a tensor")
            return embedding

    return Pipeline().eval()
