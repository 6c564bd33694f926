"""A tiny PNG writer and an image-folder builder for the training tests (plain Python)."""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path


def png_bytes(width: int, height: int, pixel) -> bytes:
    """An RGB PNG built from raw bytes; ``pixel(x, y)`` gives ``(r, g, b)``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in pixel(x, y)) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def make_image_folder(root: Path, classes=("circle", "square", "triangle"), train_per_class=24, test_per_class=6,
                      size=12, seed=0) -> Path:
    """train/<class>/*.png and test/<class>/*.png: each class is bright in its own colour channel."""
    rng = random.Random(seed)
    for split, count in (("train", train_per_class), ("test", test_per_class)):
        for label, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                def pixel(x, y, label=label):
                    return tuple(
                        min(255, rng.randrange(0, 90) + (150 if c == label % 3 else 0)) for c in range(3)
                    )

                (folder / f"{i:03d}.png").write_bytes(png_bytes(size, size, pixel))
    return root
