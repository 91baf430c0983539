"""The HTML report in a real headless Chromium (docs/evaluation.md, `report.html`): its three
SVG charts are in the rendered DOM with marks drawn, the screenshot shows their colours, and the
browser logs no console error. Skipped when no chromium is installed (CI installs it)."""

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.evaluation.conftest import EvalRun

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHARTS = ("failure-classes", "cost-outcome", "per-kind")
GREEN = (0x2E, 0x7D, 0x32)


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={cwd / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB(A) rows of a non-interlaced 8-bit PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [b"".join(r[i : i + 3] for i in range(0, stride, channels)) for r in rows]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_html_report_renders_its_charts_in_headless_chromium(
    scripted_run: EvalRun, tmp_path: Path
) -> None:
    """Opened from disk with no network, the page's charts are drawn: each SVG has marks in the
    DOM Chromium built, the screenshot holds the chart colours, and the console shows no error."""
    page = (scripted_run.out / "report.html").resolve().as_uri()
    dom = chromium("--dump-dom", page, cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for chart in CHARTS:
        svg = re.search(rf'<svg id="{chart}"[^>]*>(.*?)</svg>', dom.stdout, re.S)
        assert svg and re.search(r"<(rect|circle|text)\b", svg.group(1)), chart
    assert "<circle" in dom.stdout and "<rect" in dom.stdout
    shot = chromium("--window-size=800,900", f"--screenshot={tmp_path / 'report.png'}", page, cwd=tmp_path)
    assert shot.returncode == 0 and (tmp_path / "report.png").is_file(), shot.stderr[-2000:]
    width, height, rows = png_pixels(tmp_path / "report.png")
    green = sum(
        1
        for row in rows
        for i in range(0, len(row), 3)
        if all(abs(row[i + c] - GREEN[c]) < 24 for c in range(3))
    )
    assert (width, height) == (800, 900) and green > 500, green
    for log in (dom.stderr, shot.stderr):
        assert not re.search(r"CONSOLE\(\d+\)|Uncaught|Refused to|ERR_FILE_NOT_FOUND", log), log[-2000:]
