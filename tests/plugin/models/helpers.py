"""What the ONNX tests share: a varied parity corpus and editable copies of the model directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from affect_memory.gate.exemplars import load_exemplars
from affect_memory.models.onnx_embedder import bundled_model_dir

ROOT = Path(__file__).resolve().parents[3]

EDGE_CASES = [
    "",
    " ",
    "\t\n  \r\n",
    "\x00",
    "\x07 bell and \x1b escape",
    "\u200b\u200c\u200d",
    "\ufeffa byte-order mark first",
    "[CLS] [SEP] [PAD] [MASK] [UNK] written out as text",
    "Café au lait",
    "Cafe\u0301 au lait",  # the same in NFD
    "日本語のテキストです。今日は良い天気ですね。",
    "한국어 문장입니다",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "Ελληνικά κείμενα",
    "👨‍👩‍👧‍👦 a family, 🎉 a party, 🏳️‍🌈 a flag",
    "𝐁𝐨𝐥𝐝 𝕞𝕒𝕥𝕙 letters",
    "ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ",
    "<p>Some <b>HTML</b> &amp; entities</p>",
    "https://example.com/path?query=1&other=two#fragment",
    "MiXeD CaSe AND SHOUTING",
    "x" * 5000,
    "🙂" * 300,
    "漢" * 600,
    " ".join(["word"] * 254),
    " ".join(["word"] * 255),
    " ".join(["word"] * 256),
    " ".join(f"token{i}" for i in range(1000)),
    "I told my sister about the trip to Lisbon, and I felt happy. " * 40,
]
"""Texts at the edges: empty, control and invisible characters, scripts, emoji, and texts
below, at and far past the 256-word-piece cut."""

LONG_TEXTS = EDGE_CASES[-7:]
"""The edge cases of more than 256 word pieces (or close to it)."""


def parity_corpus() -> list[str]:
    """Every fourth exemplar of the English preset, every fourth labelled message, the edges."""
    exemplars = [text for texts in load_exemplars().intents.values() for text in texts]
    labelled = [
        json.loads(line)["text"]
        for line in (ROOT / "fixtures" / "intent_eval.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    return exemplars[::4] + labelled[::4] + EDGE_CASES


def model_copy(target: Path, **edits: dict[str, Any]) -> Path:
    """A copy of the bundled model directory (weights linked, not copied) with JSON edits.

    ``edits`` maps a file name (``config_json`` for ``config.json``, ``pooling`` for
    ``1_Pooling/config.json``) to keys to overwrite.
    """
    source = bundled_model_dir()
    for path in source.rglob("*"):
        if path.is_file():
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "model.safetensors":
                destination.symlink_to(path)
            else:
                shutil.copy2(path, destination)
    files = {"config_json": "config.json", "pooling": "1_Pooling/config.json"}
    for key, changes in edits.items():
        path = target / files.get(key, key)
        content = json.loads(path.read_text(encoding="utf-8"))
        content.update(changes)
        path.write_text(json.dumps(content), encoding="utf-8")
    return target
