"""The write policy at every door: after the README quickstart's remember-then-turn snippets,
the fact that answers a question ranks above whatever the turn stored, through LangChain, the
CLI and MCP.

The same snippet run with questions stored (the policy before issue 12) shows what the policy
prevents: the stored question itself outranks the fact at the doors.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from affect_memory.cli import main
from affect_memory.integrations.langchain import AffectMemoryRetriever
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.integrations.test_mcp_server import McpClient

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Quickstart"
QUESTION = "Where do I live now?"
NOW = "2026-06-02T09:00:00Z"
OLD_POLICY = "MemoryTurnEffects(memory, policy=DefaultMemoryWritePolicy(store_questions=True))"


def _run_snippets(directory: Path, *, store_questions: bool) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    setup, turn = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    assert f'engine.turn("{QUESTION}")' in turn, "the snippet's turn asks the question"
    if store_questions:
        assert "MemoryTurnEffects(memory)" in turn
        turn = "from affect_memory import DefaultMemoryWritePolicy\n" + turn.replace(
            "MemoryTurnEffects(memory)", OLD_POLICY
        )
    previous = Path.cwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(setup, "README.md", "exec"), {"__name__": "readme"})
            exec(compile(turn, "README.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(previous)


def _langchain(data: Path, embedder: Embedder) -> list[str]:
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW)
        return [document.page_content for document in retriever.invoke(QUESTION)]


def _cli(data: Path) -> list[str]:
    out = io.StringIO()
    argv = ["recall", QUESTION, "--user-id", "alice", "--now", NOW, "--json",
            "--data-dir", str(data)]  # fmt: skip
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return [hit["text"] for hit in json.loads(out.getvalue())["results"]]


def _mcp(data: Path) -> list[str]:
    env = {key: os.environ[key] for key in ("PYTHONPATH", "HF_HOME", "TMPDIR") if key in os.environ}
    env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "affect_memory.cli", "mcp", "--data-dir", str(data)],
        env=env,
        cwd=str(ROOT),
    )
    with (data / "mcp-stderr.log").open("w") as errlog:
        client = McpClient(params, errlog)
        client.start()
        try:
            found = client.ok("recall", {"query": QUESTION, "user_id": "alice"})
        finally:
            client.close()
    return [hit["text"] for hit in found["results"]]


FACT = "I moved to Berlin last week."


def test_the_answering_fact_ranks_first_at_every_door(tmp_path: Path, embedder: Embedder) -> None:
    _run_snippets(tmp_path, store_questions=False)
    data = tmp_path / ".affect-memory"
    for door, texts in (
        ("LangChain", _langchain(data, embedder)),
        ("CLI", _cli(data)),
        ("MCP", _mcp(data)),
    ):
        assert texts[0] == FACT, f"{door}: {texts}"
        assert QUESTION not in texts, f"{door}: the question was stored"


def test_with_questions_stored_the_question_outranks_the_fact(
    tmp_path: Path, embedder: Embedder
) -> None:
    _run_snippets(tmp_path, store_questions=True)
    data = tmp_path / ".affect-memory"
    for door, texts in (("LangChain", _langchain(data, embedder)), ("CLI", _cli(data))):
        assert texts.index(QUESTION) < texts.index(FACT), f"{door}: {texts}"

