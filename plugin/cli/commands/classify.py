"""``affect-memory classify``: the offline intent gate on a message, a batch or a labelled set."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affect_memory.errors import QueryFileError
from affect_memory.jsonl import read_jsonl
from affect_memory.kernel.engine import DEFAULT_ENGINE_LIMITS
from affect_memory.kernel.errors import InvalidInputError, shown

if TYPE_CHECKING:
    from affect_memory.gate.classifier import EmbeddingIntentGate
    from affect_memory.gate.evaluation import EvaluationReport

__all__ = ["register", "run"]

_TEXT_WIDTH = 60

MAX_TEXT_CHARS = DEFAULT_ENGINE_LIMITS.max_message_chars
"""Longest message classified: the engine's own message limit, so no door takes more."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``classify`` sub-command."""
    parser = commands.add_parser(
        "classify",
        help="classify messages into intents with the offline embedding gate",
        description=(
            "Classify TEXT into one of the seven intents (or a custom intent of --exemplars) "
            "by similarity to labelled exemplars, offline. With --queries, read one "
            '{"text"} object per line (other keys are ignored) and print one '
            '{"text", "intent", "confidence", "should_retrieve"} line per input with --json, '
            'loading the model once. With --evaluate, read {"text", "intent"} lines (an '
            'optional "split" is reported separately) and print accuracy, per-intent '
            "precision and recall and the confusion matrix. A bad line exits 2 naming it. "
            f"A message may have at most {MAX_TEXT_CHARS:,} characters, as in a turn."
        ),
    )
    parser.add_argument("text", nargs="?", metavar="TEXT", help="the message to classify")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--queries", type=Path, metavar="FILE.jsonl", help='classify one {"text"} per line'
    )
    source.add_argument(
        "--evaluate",
        type=Path,
        metavar="FILE.jsonl",
        help='score the gate on labelled {"text", "intent"} lines',
    )
    parser.add_argument(
        "--exemplars",
        type=Path,
        metavar="FILE",
        help="replace the English preset with this exemplar file",
    )
    parser.add_argument(
        "--min-accuracy",
        type=float,
        metavar="A",
        help="with --evaluate: exit 1 when accuracy is below A",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def _too_long(text: str) -> str | None:
    """Why ``text`` is too long to classify, or None."""
    if len(text) <= MAX_TEXT_CHARS:
        return None
    return f"has {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,} (as for a turn)"


def _string(path: Path, number: int, value: dict[str, Any], key: str) -> str:
    if key not in value:
        raise QueryFileError(f'{path} line {number}: missing "{key}"')
    item = value[key]
    if not isinstance(item, str):
        raise QueryFileError(
            f'{path} line {number}: "{key}" must be a string, got {type(item).__name__}'
        )
    problem = _too_long(item) if key == "text" else None
    if problem is not None:
        raise QueryFileError(f'{path} line {number}: "text" {problem}')
    return item


def _read_queries(path: Path) -> list[str]:
    texts = [
        _string(path, number, value, "text")
        for number, value in read_jsonl(path, error=QueryFileError)
    ]
    if not texts:
        raise QueryFileError(f'{path}: no queries (expected one {{"text"}} object per line)')
    return texts


def _read_labelled(
    path: Path, labels: tuple[str, ...]
) -> tuple[list[str], list[str], list[str | None]]:
    texts: list[str] = []
    intents: list[str] = []
    splits: list[str | None] = []
    for number, value in read_jsonl(path, error=QueryFileError):
        texts.append(_string(path, number, value, "text"))
        intent = _string(path, number, value, "intent").strip().upper()
        if intent not in labels:
            raise QueryFileError(
                f"{path} line {number}: intent {shown(value['intent'])} is not one of "
                f"{list(labels)}"
            )
        intents.append(intent)
        split = value.get("split")
        if split is not None and not isinstance(split, str):
            raise QueryFileError(f'{path} line {number}: "split" must be a string when given')
        splits.append(split)
    if not texts:
        raise QueryFileError(f'{path}: no examples (expected {{"text", "intent"}} lines)')
    return texts, intents, splits


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT_WIDTH else flat[: _TEXT_WIDTH - 1] + "…"


def _format_report(report: EvaluationReport) -> str:
    from affect_memory.formatting import format_table

    parts = [f"accuracy {report.accuracy:.3f} ({report.correct}/{report.total})"]
    for name, (correct, total) in report.groups.items():
        parts.append(f"  split {name}: {correct / total:.3f} ({correct}/{total})")
    per_intent = report.per_intent()
    parts += [
        "",
        format_table(
            ["intent", "precision", "recall", "f1", "support"],
            [
                [label, v["precision"], v["recall"], v["f1"], int(v["support"])]
                for label, v in per_intent.items()
            ],
        ),
        "",
        "confusion (rows: labelled, columns: predicted)",
        format_table(
            ["labelled", *(label[:5] for label in report.labels)],
            [[label, *row] for label, row in zip(report.labels, report.confusion, strict=True)],
        ),
    ]
    if report.errors:
        parts += [
            "",
            format_table(
                ["text", "labelled", "predicted", "confidence"],
                [[_short(t), e, p, c] for t, e, p, c in report.errors],
            ),
        ]
    return "\n".join(parts)


def _build_gate(args: argparse.Namespace) -> EmbeddingIntentGate:
    from affect_memory.gate.classifier import EmbeddingIntentGate
    from affect_memory.gate.exemplars import load_exemplars

    exemplars = load_exemplars(args.exemplars) if args.exemplars is not None else None
    return EmbeddingIntentGate(exemplars=exemplars)


def run(args: argparse.Namespace) -> int:
    """Classify TEXT, a ``--queries`` batch, or score an ``--evaluate`` set."""
    chosen = sum(x is not None for x in (args.text, args.queries, args.evaluate))
    if chosen != 1:
        raise InvalidInputError("give exactly one of TEXT, --queries FILE or --evaluate FILE")
    if args.min_accuracy is not None and args.evaluate is None:
        raise InvalidInputError("--min-accuracy only applies to --evaluate")
    if args.text is not None and (problem := _too_long(args.text)) is not None:
        raise InvalidInputError(f"TEXT {problem}")
    gate = _build_gate(args)  # validates --exemplars before any file is read or model loaded
    if args.evaluate is not None:
        return _run_evaluate(args, gate)
    texts = [args.text] if args.text is not None else _read_queries(args.queries)
    predictions = gate.classify_many(texts)
    if args.json:
        for text, prediction in zip(texts, predictions, strict=True):
            print(json.dumps(prediction.to_json(text), ensure_ascii=False))
        return 0
    from affect_memory.formatting import format_table

    if args.text is not None:
        prediction = predictions[0]
        note = " (fallback)" if prediction.fallback else ""
        retrieve = "yes" if prediction.should_retrieve else "no"
        print(
            f"{prediction.intent}{note}  confidence {prediction.confidence:.3f}  "
            f"retrieve {retrieve}"
        )
        ranked = sorted(prediction.scores.items(), key=lambda item: -item[1])
        print(format_table(["intent", "score"], [[label, score] for label, score in ranked]))
        return 0
    print(
        format_table(
            ["text", "intent", "confidence", "retrieve"],
            [
                [_short(t), p.intent, p.confidence, "yes" if p.should_retrieve else "no"]
                for t, p in zip(texts, predictions, strict=True)
            ],
        )
    )
    return 0


def _run_evaluate(args: argparse.Namespace, gate: EmbeddingIntentGate) -> int:
    from affect_memory.gate.evaluation import evaluate

    texts, intents, splits = _read_labelled(args.evaluate, gate.labels)
    report = evaluate(gate, texts, intents, splits if any(s is not None for s in splits) else None)
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print(_format_report(report))
    if args.min_accuracy is not None and report.accuracy < args.min_accuracy:
        print(
            f"accuracy {report.accuracy:.4f} is below --min-accuracy {args.min_accuracy}",
            file=sys.stderr,
        )
        return 1
    return 0
