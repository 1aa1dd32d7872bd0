"""A small PNG of a published site's page, taken by headless Chromium: the README's picture.

    python scripts/screenshot_site.py                      # ./html/index.html -> docs/images/site.png
    python scripts/screenshot_site.py /srv/bench/html --out /tmp/site.png --size 1400x900
    python scripts/screenshot_site.py html --page graphs.html --out /tmp/grid.png

The page is opened from disk (``file://``; every page of the site works there, see
docs/site.md) in a fresh Chromium profile, with time for its scripts to run. The PNG is
then reduced to 256 colours (the page's most common colours kept exactly, the rest by
median cut), so that a text-heavy page stays small.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "images" / "site.png"
PALETTE = 256
EXACT = 48  # the most common colours (background, text, links) kept as they are
SCRIPT_TIME_MS = 5000  # virtual time for the page's scripts (asv's grid loads its graphs)
# Chromium now and then leaves the bottom of its window half painted: the shot is taken taller,
# then cut to the size asked for.
MARGIN = 200


def take(page: Path, out: Path, width: int, height: int) -> None:
    """Chromium's own screenshot of `page` (24-bit PNG, `MARGIN` taller than asked) into `out`."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("screenshot_site: chromium is not installed (scripts/install.sh installs Debian's chromium)")
    with tempfile.TemporaryDirectory(prefix="benchkit-screenshot-") as profile:
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={width},{height + MARGIN}",
            f"--virtual-time-budget={SCRIPT_TIME_MS}", f"--screenshot={out}", page.resolve().as_uri(),
        ]  # fmt: skip
        run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if run.returncode != 0 or not out.is_file():
        sys.exit(f"screenshot_site: chromium failed (exit {run.returncode}):\n{run.stderr[-2000:]}")


# ------------------------------------------------------------------ PNG


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    found, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        found.append((data[at + 4 : at + 8], data[at + 8 : at + 8 + length]))
        at += 12 + length
    return found


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_rgb(data: bytes) -> np.ndarray:
    """The pixels (height, width, 3) of an 8-bit RGB or RGBA PNG without interlacing (Chromium's)."""
    chunks = _chunks(data)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unexpected PNG: bit depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), np.uint8)
    rows = raw.reshape(height, 1 + width * bpp)
    pixels = np.zeros((height, width * bpp), np.uint8)
    previous = np.zeros(width * bpp, np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 1:  # Sub: a running sum per channel
            current = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            current = (line + previous) % 256
        elif kind in (3, 4):  # Average, Paeth: each byte needs the one reconstructed before it
            out, up = line.tolist(), previous.tolist()
            for i in range(len(out)):
                left = out[i - bpp] if i >= bpp else 0
                upper_left = up[i - bpp] if i >= bpp else 0
                guess = (left + up[i]) // 2 if kind == 3 else _paeth(left, up[i], upper_left)
                out[i] = (out[i] + guess) % 256
            current = np.array(out, np.int32)
        else:
            raise ValueError(f"row {y}: unknown PNG filter {kind}")
        pixels[y] = current
        previous = current
    return pixels.reshape(height, width, bpp)[:, :, :3]


def _median_cut(colours: np.ndarray, weights: np.ndarray, boxes: int) -> np.ndarray:
    """`boxes` colours standing for `colours` (n, 3), each the weighted mean of its box."""
    parts = [np.arange(len(colours))]
    while len(parts) < boxes:
        spans = [np.ptp(colours[p], axis=0).max() if len(p) > 1 else -1 for p in parts]
        widest = int(np.argmax(spans))
        if spans[widest] <= 0:
            break
        part = parts.pop(widest)
        channel = int(np.argmax(np.ptp(colours[part], axis=0)))
        ordered = part[np.argsort(colours[part, channel], kind="stable")]
        cumulative = np.cumsum(weights[ordered])
        cut = int(np.clip(np.searchsorted(cumulative, cumulative[-1] / 2), 1, len(ordered) - 1))
        parts += [ordered[:cut], ordered[cut:]]
    return np.array([np.average(colours[p], axis=0, weights=weights[p]) for p in parts]).round()


def quantize(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(palette (k, 3), index per pixel (height, width)) with k <= PALETTE."""
    packed = (pixels[..., 0].astype(np.int64) << 16) | (pixels[..., 1].astype(np.int64) << 8) | pixels[..., 2]
    unique, inverse, counts = np.unique(packed.reshape(-1), return_inverse=True, return_counts=True)
    colours = np.stack([(unique >> 16) & 255, (unique >> 8) & 255, unique & 255], axis=1)
    if len(unique) <= PALETTE:
        return colours.astype(np.uint8), inverse.reshape(pixels.shape[:2])
    common = np.argsort(-counts, kind="stable")[:EXACT]
    rest = np.setdiff1d(np.arange(len(unique)), common)
    palette = np.concatenate([colours[common], _median_cut(colours[rest], counts[rest], PALETTE - EXACT)])
    nearest = np.empty(len(unique), np.int64)
    for start in range(0, len(unique), 4096):  # each colour to its nearest palette entry
        block = colours[start : start + 4096, None, :].astype(np.int64) - palette[None, :, :].astype(np.int64)
        nearest[start : start + 4096] = np.argmin((block**2).sum(axis=2), axis=1)
    return palette.astype(np.uint8), nearest[inverse].reshape(pixels.shape[:2])


def write_indexed(palette: np.ndarray, indices: np.ndarray) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    height, width = indices.shape
    rows = np.hstack([np.zeros((height, 1), np.uint8), indices.astype(np.uint8)])  # filter 0 per row
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)),
            chunk(b"PLTE", palette.astype(np.uint8).tobytes()),
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)),
            chunk(b"IEND", b""),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("html_dir", nargs="?", type=Path, default=Path("html"), help="the published site")
    parser.add_argument("--page", default="index.html", help="the page to show (default: the front page)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    parser.add_argument("--size", default="1200x800", help="window WIDTHxHEIGHT in CSS pixels")
    args = parser.parse_args(argv)
    page = args.html_dir / args.page
    if not page.is_file():
        sys.exit(f"screenshot_site: {page} not found: publish the site first (benchkit publish)")
    try:
        width, height = (int(n) for n in args.size.lower().split("x"))
    except ValueError:
        sys.exit(f"screenshot_site: --size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1200x800")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benchkit-screenshot-") as scratch:
        shot = Path(scratch) / "chromium.png"
        take(page, shot, width, height)
        taken = shot.read_bytes()
    palette, indices = quantize(read_rgb(taken)[:height])
    small = write_indexed(palette, indices)
    args.out.write_bytes(small)
    print(
        f"{args.out}: {width}x{height}, {len(small) / 1024:.0f} KiB "
        f"({len(palette)} colours; Chromium's PNG: {len(taken) / 1024:.0f} KiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
