"""File-level retrieval quality of the code index on real code nobody here wrote.

For each codebase (an installed library's source, copied to a temporary directory), queries are
made from public function and method docstrings: the first sentence, with the function's own name
removed, and the target is the file that defines the function. Sentences that occur in more than
one file are dropped (no single right answer). The indexed copy has every docstring stripped
(replaced by `...`, line numbers kept), so a query is never graded against its own text: with
the docstrings in, keyword search alone finds the target first almost always, which measures
string matching, not retrieval. `--keep-docstrings` restores that leaky setting. Each query runs through `CodeIndex.search` with
per-file aggregation in three modes, keyword-only, vector-only and hybrid (RRF + identifier
boosts), and the script prints file recall@1/@5/@10 and MRR@10 per codebase and pooled.

Unless `--no-plain`, every codebase is indexed a second time with the plain float32 encoder
(`SentenceTransformer.encode` as shipped, at the model's own token cap) to check that the fast
path (bfloat16, token-length batches, a 128-token cap; `--max-tokens`) keeps retrieval quality:
the vector and hybrid rows are printed for both, with the cosine agreement of the two encoders'
vectors over every chunk.

    .venv/bin/python benchmarks/retrieval_eval.py [--codebases rich click anyio httpx2] [--per-codebase 80]
        [--devset DIR --trees DIR [--index-root DIR] [--devset-sample N]]

With `--devset`, the same run then scores file localization on a development set of real issues
(`localization_eval.py`: codeloop `--per-file` beside whole-file BM25, with its `score.py`), so
the synthetic figures above are printed beside ones from real bug reports.

The fast encoder's vectors come from the shared embedding cache (`$CODELOOP_CACHE_DIR`), so a
second run is quick; the float32 reference has its own cache beside it.
"""

import argparse
import ast
import importlib.util
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np

from codeloop.config.environment import tool_server_config
from layout import TREE_DIR
from tool_servers.search.embedding.embed import CachedEmbedder, load_model
from tool_servers.search.embedding.embed_cache import EmbeddingCache, default_cache_dir
from tool_servers.search.errors import InvalidQuery
from tool_servers.search.index.code_index import CodeIndex, open_index

DEFAULT_CODEBASES = ["rich", "click", "anyio", "httpx2"]
MODES = ("keyword", "vector", "hybrid")
TOP_K = 10
MIN_WORDS = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class Query:
    text: str
    target: str
    """Defining file, relative to the codebase root."""
    function: str


@dataclass
class Scores:
    ranks: list[int | None]

    def recall(self, k: int) -> float:
        return sum(1 for r in self.ranks if r is not None and r <= k) / max(len(self.ranks), 1)

    def mrr(self) -> float:
        return sum(1.0 / r for r in self.ranks if r is not None) / max(len(self.ranks), 1)


def first_sentence(docstring: str) -> str:
    paragraph = re.split(r"\n\s*\n", docstring.strip(), maxsplit=1)[0]
    flat = " ".join(paragraph.split())
    return _SENTENCE_END.split(flat, maxsplit=1)[0]


def without_name(sentence: str, name: str) -> str:
    """Drop the function's own name (and `name()`, backticks around it) from the sentence."""
    cleaned = re.sub(rf"`*\b{re.escape(name)}\b(\(\))?`*", " ", sentence, flags=re.IGNORECASE)
    return " ".join(cleaned.split())


def docstring_queries(root: Path, *, limit: int, seed: int = 0) -> list[Query]:
    """Queries from the public functions' docstrings under `root`, at most `limit`, sampled with `seed`."""
    found: list[Query] = []
    for file in sorted(root.rglob("*.py")):
        relative = file.relative_to(root).as_posix()
        if "/tests/" in f"/{relative}" or TREE_DIR in relative:
            continue
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            text = without_name(first_sentence(doc), node.name)
            if len(re.findall(r"[A-Za-z]{2,}", text)) >= MIN_WORDS and len(text) <= 300:
                found.append(Query(text, relative, node.name))
    files_of: dict[str, set[str]] = {}
    for query in found:
        files_of.setdefault(query.text.lower(), set()).add(query.target)
    unique = {q.text.lower(): q for q in found if len(files_of[q.text.lower()]) == 1}
    queries = sorted(unique.values(), key=lambda q: (q.target, q.function, q.text))
    random.Random(seed).shuffle(queries)
    return queries[:limit]


def strip_docstrings(root: Path) -> int:
    """Replace every module, class and function docstring under `root` by `...` on the same
    lines (so line numbers hold); returns how many were stripped."""
    stripped = 0
    for file in sorted(root.rglob("*.py")):
        try:
            source = file.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        spans = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
                and first.lineno != getattr(node, "lineno", 0)  # `def f(): "doc"` stays: rare
            ):
                spans.append((first.lineno, first.end_lineno, first.col_offset))
        for start, end, col in sorted(spans, reverse=True):
            blank = ["\n"] * (end - start)
            lines[start - 1 : end] = [" " * col + "...\n", *blank]
            stripped += 1
        file.write_text("".join(lines), encoding="utf-8")
    return stripped


def package_source(package: str) -> Path | None:
    """The source directory of an installed package, None if it is not installed as one."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def copy_package(source: Path, target: Path) -> Path:
    """Copy a package's sources (no bytecode or extension modules) to `target`."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    return target


def copy_codebase(package: str, into: Path) -> Path:
    source = package_source(package)
    if source is None:
        raise SystemExit(f"error: package {package!r} is not installed in this environment")
    return copy_package(source, into / package)


async def rank_of_target(index: CodeIndex, query: Query, mode: str) -> int | None:
    try:
        result = await index.search(query.text, k=TOP_K, per_file=True, mode=mode)  # type: ignore[arg-type] - mode comes from the command line, checked against the index's modes
    except InvalidQuery:
        return None
    for position, hit in enumerate(result.hits, start=1):
        if hit.path == query.target:
            return position
    return None


async def evaluate(index: CodeIndex, queries: list[Query], modes: tuple[str, ...]) -> dict[str, Scores]:
    scores = {mode: Scores([]) for mode in modes}
    for query in queries:
        for mode in modes:
            scores[mode].ranks.append(await rank_of_target(index, query, mode))
    return scores


def vectors_by_hash(index: CodeIndex) -> dict[str, np.ndarray]:
    table = index.store.chunks.search().select(["embed_hash", "vector"]).limit(None).to_arrow()
    hashes = table.column("embed_hash").to_pylist()
    vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    return dict(zip(hashes, vectors, strict=True))


def print_table(title: str, rows: dict[str, Scores]) -> None:
    print(f"\n{title}")
    print(f"  {'ranking':<22} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}")
    for label, s in rows.items():
        print(
            f"  {label:<22} {len(s.ranks):>4} {s.recall(1):>6.3f} {s.recall(5):>6.3f}"
            f" {s.recall(10):>6.3f} {s.mrr():>6.3f}"
        )


async def main(args: argparse.Namespace) -> int:
    cache_root = tool_server_config().cache_dir
    cache_dir = args.cache_dir or default_cache_dir(cache_root)
    started = time.perf_counter()
    max_tokens = "auto" if args.max_tokens is None else (args.max_tokens or None)
    fast_model = await anyio.to_thread.run_sync(
        lambda: load_model(max_tokens=max_tokens, cache_root=cache_root)
    )
    fast = CachedEmbedder(fast_model, EmbeddingCache(cache_dir))
    plain = None
    if not args.no_plain:
        reference_cache = cache_dir.parent / "embeddings-float32-reference"
        plain = CachedEmbedder(
            fast_model.with_options(fast=False, max_tokens=None), EmbeddingCache(reference_cache)
        )
    print(
        f"model {fast.name}: fast path = {fast_model.runtime} {fast_model.precision}, token-length batches; "
        f"loaded in {time.perf_counter() - started:.1f} s; cache {cache_dir}"
    )
    pooled: dict[str, Scores] = {}
    with tempfile.TemporaryDirectory(prefix="codeloop-eval-") as tmp:
        for package in args.codebases:
            root = copy_codebase(package, Path(tmp))
            queries = docstring_queries(root, limit=args.per_codebase)
            if not args.keep_docstrings:
                strip_docstrings(root)
            t0 = time.perf_counter()
            index = await open_index(root, index_dir=Path(tmp) / "index-fast" / package, embedder=fast)
            report = await index.update()
            rows = await evaluate(index, queries, MODES)
            results = dict(rows)
            extra = ""
            if plain is not None:
                reference = await open_index(
                    root, index_dir=Path(tmp) / "index-plain" / package, embedder=plain
                )
                await reference.update()
                plain_rows = await evaluate(reference, queries, ("vector", "hybrid"))
                results |= {f"{m} (plain float32)": plain_rows[m] for m in ("vector", "hybrid")}
                a, b = vectors_by_hash(index), vectors_by_hash(reference)
                cos = np.array([float(a[h] @ b[h]) for h in a if h in b])
                extra = f"; fast vs plain cosine over {cos.size} chunks: min {cos.min():.4f} mean {cos.mean():.5f}"
            print_table(
                f"{package}: {report.files} files, {report.chunks} chunks, {len(queries)} queries, "
                f"{time.perf_counter() - t0:.0f} s{extra}",
                results,
            )
            for label, s in results.items():
                pooled.setdefault(label, Scores([])).ranks.extend(s.ranks)
    print_table(f"pooled over {', '.join(args.codebases)}", pooled)
    best_single = max(pooled["keyword"].mrr(), pooled["vector"].mrr())
    verdict = "beats" if pooled["hybrid"].mrr() > best_single else "DOES NOT beat"
    print(
        f"\nhybrid MRR {pooled['hybrid'].mrr():.3f} {verdict} keyword-only {pooled['keyword'].mrr():.3f}"
        f" and vector-only {pooled['vector'].mrr():.3f}; total {time.perf_counter() - started:.0f} s"
    )
    if args.devset is not None:
        await anyio.to_thread.run_sync(lambda: run_devset(args))
    return 0 if verdict == "beats" else 1


def run_devset(args: argparse.Namespace) -> None:
    """Print `localization_eval.py`'s table for the development set `args.devset`."""
    import subprocess

    cmd = [sys.executable, str(Path(__file__).with_name("localization_eval.py")), str(args.devset)]
    cmd += ["--trees", str(args.trees)]
    if args.index_root:
        cmd += ["--index-root", str(args.index_root)]
    if args.devset_sample:
        cmd += ["--sample", str(args.devset_sample)]
    if args.bm25_python:
        cmd += ["--bm25-python", args.bm25_python]
    print("\nfile localization on the development set (score.py):", flush=True)
    subprocess.run(cmd, check=False)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codebases", nargs="+", default=DEFAULT_CODEBASES, help="installed packages")
    parser.add_argument("--per-codebase", type=int, default=80, help="queries sampled per codebase")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache directory")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="token cap on what the fast encoder reads; 0: the model's own cap (default: the index's default)",
    )
    parser.add_argument("--no-plain", action="store_true", help="skip the float32 reference index")
    parser.add_argument(
        "--devset", type=Path, help="a development set of real issues (see localization_eval.py)"
    )
    parser.add_argument("--trees", type=Path, help="its materialized trees")
    parser.add_argument("--index-root", type=Path, help="where the trees' indexes live")
    parser.add_argument("--devset-sample", type=int, help="score N cases per half")
    parser.add_argument("--bm25-python", help="an interpreter with bm25s and PyStemmer")
    parser.add_argument(
        "--keep-docstrings",
        action="store_true",
        help="index the docstrings the queries come from (the old, leaky setting)",
    )
    args = parser.parse_args()
    if args.devset is not None and args.trees is None:
        parser.error("--devset needs --trees (the directory its trees were materialized into)")
    return args


if __name__ == "__main__":
    sys.exit(anyio.run(main, parse_args()))
