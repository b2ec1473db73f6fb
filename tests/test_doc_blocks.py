"""Every fenced code block in README.md and docs/*.md runs, or says why it does not.

The rule (docs/contributing.md, "Code blocks in the docs", says the same):

* A block's info string (the word after the opening fence) says what it is.

  - ``python``: run.  The python blocks of one file run in order in one namespace, as
    a reader pasting them into one session would, with a fresh temporary directory as
    the current directory.  They use the memory backend; a block that names a Redis
    server as ``redis.example.com`` (with or without a port) gets a private
    ``redis-server`` started for its file instead, the host and port replaced.  What a
    block prints is not compared: it fails by raising.  Queue managers and
    facilities the blocks leave open are closed at the end, as the end of the
    reader's session would.
  - ``sh``, ``bash``, ``shell``, ``console``: every command (a line; ``$ `` prompts,
    comments and blank lines skipped, ``\\`` continuations joined) must be a
    ``sharedq`` command (``sharedq``, ``.venv/bin/sharedq`` or ``python -m sharedq``),
    run in its own process in a temporary directory; it must exit 0.  Anything else,
    or a command that needs what the test cannot give cheaply (a Spark job over a
    recovery root, a production server), is marked as an excerpt.
  - ``text``: not code (diagrams, formulas, synopses, output); not run.
  - ``toml``, ``json``: configuration; parsed, not run.
  - no info string, or any other: an error.  Give the block one of the above.

* A line ``<!-- excerpt -->`` right before the opening fence marks a block that is a
  part of something bigger (names defined elsewhere, a production host, a template
  for the reader's own code): it is not run, whatever its language.  The marker is
  used nowhere else.

* The README's Quick start block is not run here, and is not marked either: its two
  commands (set up and run the demo; set up and run every test) are what a new user
  types first, so the section opens with them and nothing else.  Line 2 runs this
  very suite, and line 1 runs the demo for a minute or more on a full pipeline
  (tests/pipeline/test_demo.py runs the demo itself).  The test checks that the
  section opens with that block, of exactly those two commands.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharedq.testing.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

MARKER = "<!-- excerpt -->"
_MARKER_LINE = re.compile(r"^\s*<!--\s*excerpt\s*-->\s*$", re.IGNORECASE)
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")

PYTHON = frozenset({"python"})
SHELL = frozenset({"sh", "bash", "shell", "console"})
TEXT = frozenset({"text"})
DATA: dict[str, Callable[[str], object]] = {"toml": tomllib.loads, "json": json.loads}
#: How a block names "a Redis server" so that the test can give it one.
_EXAMPLE_REDIS = re.compile(r"(?<![\w.-])redis\.example\.com(:\d+)?")
#: The commands a shell block may run, and how (``sharedq`` in this environment).
_SHAREDQ = ("sharedq", ".venv/bin/sharedq")
#: Seconds one shell command may take: a cheap command, not a Spark job.
COMMAND_TIMEOUT = 60


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language, its text, and whether marked."""

    path: Path
    line: int  # of the opening fence, from 1
    language: str
    text: str
    excerpt: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse(path: Path, source: str | None = None) -> tuple[list[Block], list[str]]:
    """The blocks of a Markdown file, and what is wrong with its markers and fences."""
    lines = (path.read_text(encoding="utf-8") if source is None else source).split("\n")
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = _FENCE.match(line)
        if _MARKER_LINE.match(line):
            after = lines[i + 1] if i + 1 < len(lines) else ""
            if line.strip() != MARKER:
                problems.append(f"line {i + 1}: write the marker exactly as {MARKER}")
            if not _FENCE.match(after):
                problems.append(f"line {i + 1}: {MARKER} must be right before a code fence")
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            problems.append(f"line {i + 1}: a code fence that is never closed")
        indent = len(opening["indent"])
        body = [text[indent:] if text[:indent].isspace() else text for text in lines[i + 1 : end]]
        info = opening["info"].strip().split()
        blocks.append(
            Block(
                path,
                i + 1,
                info[0].lower() if info else "",
                "\n".join(body) + "\n",
                i > 0 and lines[i - 1].strip() == MARKER,
            )
        )
        i = end + 1
    return blocks, problems


def quick_start(blocks: list[Block], source: str) -> Block:
    """The README's Quick start block: the first thing under its heading."""
    lines = source.split("\n")
    heading = lines.index("## Quick start")
    first = next(n for n in range(heading + 1, len(lines)) if lines[n].strip())
    found = [b for b in blocks if b.line == first + 1]
    assert found, "README.md: the Quick start section must open with its code block"
    return found[0]


def shell_commands(text: str) -> list[list[str]]:
    """A shell block's commands, each split into words (see the module's rule)."""
    commands: list[list[str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending and line.startswith("$ "):
            line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append(shlex.split(pending + line, comments=True))
        pending = ""
    if pending:
        commands.append(shlex.split(pending, comments=True))
    return commands


def sharedq_args(words: list[str]) -> list[str] | None:
    """The arguments of a ``sharedq`` command, or ``None`` when it is something else."""
    if words and words[0] in _SHAREDQ:
        return words[1:]
    if (
        len(words) >= 3
        and Path(words[0]).name.startswith("python")
        and words[1:3]
        == [
            "-m",
            "sharedq",
        ]
    ):
        return words[3:]
    return None


class RedisForExamples:
    """A private server for one file's blocks, started when a block first names one."""

    def __init__(self) -> None:
        self.server: RedisServer | None = None

    def substitute(self, text: str) -> str:
        if not _EXAMPLE_REDIS.search(text):
            return text
        if self.server is None:
            self.server = RedisServer().start()
        return _EXAMPLE_REDIS.sub(f"127.0.0.1:{self.server.port}", text)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def close_what_is_open(namespace: dict[str, object]) -> None:
    """Close the queue managers, then the facilities, the blocks left open."""
    from sharedq.cf import CouplingFacility
    from sharedq.mq import QueueManager

    for kind in (QueueManager, CouplingFacility):
        for value in list(namespace.values()):
            if isinstance(value, kind):
                with suppress(Exception):
                    value.close()


def run_file(blocks: list[Block], workdir: Path) -> None:
    """Run a file's runnable blocks (see the module's rule); raise on the first failure."""
    redis = RedisForExamples()
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    before = Path.cwd()
    os.chdir(workdir)
    try:
        for block in blocks:
            if block.excerpt:
                continue
            if block.language in PYTHON:
                code = compile(redis.substitute(block.text), block.where(), "exec")
                try:
                    exec(code, namespace)
                except BaseException as exc:
                    raise AssertionError(
                        f"{block.where()}: the python block raised {exc!r}"
                    ) from exc
            elif block.language in SHELL:
                for words in shell_commands(redis.substitute(block.text)):
                    run_command(block, words, workdir)
            elif block.language in DATA:
                DATA[block.language](block.text)
    finally:
        close_what_is_open(namespace)
        os.chdir(before)
        redis.stop()


def run_command(block: Block, words: list[str], workdir: Path) -> None:
    args = sharedq_args(words)
    assert args is not None, (
        f"{block.where()}: {shlex.join(words)!r} is not a sharedq command: mark the block {MARKER}"
    )
    result = subprocess.run(
        [sys.executable, "-m", "sharedq", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"{block.where()}: {shlex.join(words)} exited {result.returncode}:\n{result.stderr}"
    )


def kinds_problems(blocks: list[Block]) -> list[str]:
    known = PYTHON | SHELL | TEXT | set(DATA)
    return [
        f"{b.where()}: a block with "
        + (f"the info string {b.language!r}" if b.language else "no info string")
        + f": give it one of {sorted(known)}, or mark it {MARKER}"
        for b in blocks
        if b.language not in known and not b.excerpt
    ]


# -- the docs ----------------------------------------------------------------------------


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", DOCS, ids=_doc_id)
def test_every_block_runs_or_is_marked(path: Path, tmp_path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    blocks, problems = parse(path, source)
    problems += kinds_problems(blocks)
    assert problems == []
    if path.name == "README.md" and path.parent == ROOT:
        first = quick_start(blocks, source)
        commands = [line for line in first.text.splitlines() if line.strip()]
        assert len(commands) == 2, commands
        assert commands[0].endswith(".venv/bin/sharedq demo"), commands
        assert commands[1].endswith(".venv/bin/python -m pytest"), commands
        assert not first.excerpt
        blocks = [b for b in blocks if b is not first]
    run_file(blocks, tmp_path)


def test_docs_have_blocks_that_run() -> None:
    """The rule is not met by marking everything: the examples a reader starts from run
    (the README's, and each page's first)."""
    runnable = 0
    for path in DOCS:
        blocks = parse(path)[0]
        runnable += sum(b.language in PYTHON and not b.excerpt for b in blocks)
    assert runnable >= 7
    readme = parse(ROOT / "README.md")[0]
    assert all(not b.excerpt for b in readme if b.language in PYTHON)


# -- the checker itself ------------------------------------------------------------------

_SAMPLE = """# A page

Text with `<!-- excerpt -->` in it, inline: not a marker.

```python
x = 1
```

<!-- excerpt -->
```python
this is not python
```

  ```text
  a diagram, indented
  ```

```
no info string
```

<!--excerpt-->
```sh
sharedq walk
```

<!-- excerpt -->
Not a fence.
"""


def test_the_checker_finds_what_it_must() -> None:
    blocks, problems = parse(ROOT / "sample.md", _SAMPLE)
    assert [(b.line, b.language, b.excerpt) for b in blocks] == [
        (5, "python", False),
        (10, "python", True),
        (14, "text", False),
        (18, "", False),
        (23, "sh", False),
    ]
    assert blocks[2].text == "a diagram, indented\n"
    assert problems == [
        "line 22: write the marker exactly as <!-- excerpt -->",
        "line 27: <!-- excerpt --> must be right before a code fence",
    ]
    assert kinds_problems(blocks) == [
        "sample.md:18: a block with no info string: give it one of "
        "['bash', 'console', 'json', 'python', 'sh', 'shell', 'text', 'toml'], "
        "or mark it <!-- excerpt -->"
    ]


def test_shell_commands_are_split_and_checked() -> None:
    text = (
        "# set up\n$ sharedq walk \\\n    --facility memory://\n\n.venv/bin/sharedq demo --short\n"
    )
    assert shell_commands(text) == [
        ["sharedq", "walk", "--facility", "memory://"],
        [".venv/bin/sharedq", "demo", "--short"],
    ]
    assert sharedq_args(["python", "-m", "sharedq", "walk"]) == ["walk"]
    assert sharedq_args(["redis-cli", "FLUSHALL"]) is None


def test_a_failing_block_fails_with_its_place(tmp_path: Path) -> None:
    source = "```python\nraise ValueError('no')\n```\n"
    blocks, _ = parse(ROOT / "sample.md", source)
    with pytest.raises(AssertionError, match=r"sample\.md:1: the python block raised"):
        run_file(blocks, tmp_path)
    blocks, _ = parse(ROOT / "sample.md", "```sh\nsharedq no-such-command\n```\n")
    with pytest.raises(AssertionError, match=r"sample\.md:1: sharedq no-such-command exited 2"):
        run_file(blocks, tmp_path)


def test_redis_examples_get_a_private_server(tmp_path: Path) -> None:
    source = (
        "```python\n"
        "from sharedq.cf import open_facility\n"
        "from sharedq.mq import structure_params\n"
        'facility = open_facility("redis://redis.example.com:6379/0")\n'
        'facility.create(structure_params("DOCTEST"))\n'
        "```\n"
        "```python\n"
        'assert facility.exists("DOCTEST")\n'
        'facility.delete("DOCTEST", force=True)\n'
        "```\n"
    )
    blocks, _ = parse(ROOT / "sample.md", source)
    run_file(blocks, tmp_path)
