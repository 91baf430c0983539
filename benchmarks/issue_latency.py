"""Latency of a file-ranking search for a long issue text, with the model loaded.

The query is shaped like a real bug report of about `--words` words: a title, paragraphs of
prose taken from the repository's own comments and docstrings (so its vocabulary matches the
code, which is the expensive case for the keyword leg), a pasted session in a code block, and a
traceback through real files of the repository. Every timed query differs (its sentences are
reshuffled), so no cache answers it. The index is built (or updated) first, then `--runs`
searches `CodeIndex.search(text, k=50, per_file=True)` are timed one after another.

    .venv/bin/python benchmarks/issue_latency.py --repo DIR [--index-dir DIR] [--words 3000] [--runs 20]
"""

import argparse
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

import anyio

from layout import TREE_DIR
from tool_servers.search.embedding.embed import load_embedder
from tool_servers.search.index.code_index import open_index

_SENTENCE = re.compile(r"[A-Z][^.\n]{30,200}\.")


def sentences_of(root: Path, limit: int = 5000) -> list[str]:
    """Comment and docstring sentences of the repository's Python files."""
    found: list[str] = []
    for file in sorted(root.rglob("*.py")):
        if TREE_DIR in file.parts:
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        found += [" ".join(s.split()) for s in _SENTENCE.findall(text)]
        if len(found) >= limit:
            break
    return found


def issue_text(root: Path, files: list[str], sentences: list[str], *, words: int, seed: int) -> str:
    rng = random.Random(seed)
    title = f"Unexpected result from {Path(rng.choice(files)).stem} when input is empty (run {seed})"
    frames = "".join(
        f'  File "/home/user/project/{path}", line {rng.randint(10, 900)}, in func_{i}\n    result = call()\n'
        for i, path in enumerate(rng.sample(files, 6))
    )
    session = ">>> from module import thing\n>>> thing(1, 2)\nTraceback (most recent call last):\n"
    body: list[str] = []
    count = len(title.split()) + len(frames.split()) + len(session.split())
    while count < words:
        paragraph = " ".join(rng.sample(sentences, 5))
        body.append(paragraph)
        count += len(paragraph.split())
    middle = len(body) // 2
    return "\n\n".join(
        [title, *body[:middle], f"```\n{session}{frames}ValueError: empty input\n```", *body[middle:]]
    )


async def main(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    embedder = await anyio.to_thread.run_sync(load_embedder)
    index = await open_index(args.repo, index_dir=args.index_dir, embedder=embedder)
    report = await index.update()
    print(
        f"{report.files} files, {report.chunks} chunks; model load + index update "
        f"{time.perf_counter() - started:.1f} s ({report.embedded} chunks embedded)"
    )
    files = sorted(index.store.files)
    sentences = sentences_of(index.repo)
    if len(sentences) < 20:
        sys.exit(f"{args.repo} has too little prose to build an issue from: pass a larger repository")
    texts = [issue_text(index.repo, files, sentences, words=args.words, seed=n) for n in range(args.runs + 3)]
    for text in texts[:3]:  # warm-up: first LanceDB reads, thread pools
        await index.search(text, k=50, per_file=True)
    timings, cpu = [], []
    for text in texts[3:]:
        t0, c0 = time.perf_counter(), time.process_time()
        await index.search(text, k=50, per_file=True)
        timings.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    quantiles = statistics.quantiles(timings, n=10)
    # CPU time (all threads of this process) says what a search costs when the machine is busy
    # with other work and wall time mostly measures the wait for a core.
    print(
        f"issue of ~{args.words} words ({len(texts[3])} chars), {len(timings)} searches, --per-file k=50: "
        f"wall p50 {statistics.median(timings):.0f} ms, p90 {quantiles[-1]:.0f} ms, max {max(timings):.0f} ms; "
        f"CPU p50 {statistics.median(cpu):.0f} ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", type=Path, required=True, help="repository to index and search")
    parser.add_argument("--index-dir", type=Path, default=None, help="where its index lives (default: in it)")
    parser.add_argument("--words", type=int, default=3000, help="length of the issue text")
    parser.add_argument("--runs", type=int, default=20, help="timed searches")
    return parser.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse_args())
