"""docs/cli.md and the README's CLI list name every subcommand and every scheme with its flags; the
derive examples of docs/cli.md run and print what the page shows."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from queuesgd import registry
from queuesgd.cli import main
from queuesgd.cli.parser import build_parser
from queuesgd.cli.scheme_args import scheme_flag

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = (ROOT / "docs" / "cli.md").read_text()
README = (ROOT / "README.md").read_text()


def subcommands() -> list[str]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_the_parser_has_the_subcommands_we_look_for():
    # the independent list: the (and the usage block's) eight commands
    assert set(subcommands()) == {
        "predict", "sweep", "derive", "whatif", "compare", "validate", "profile", "catalog"
    }  # fmt: skip


@pytest.mark.parametrize("command", subcommands())
def test_every_subcommand_has_a_section_and_a_usage_line(command):
    headings = [line for line in CLI_MD.splitlines() if line.startswith("## ")]
    assert any(f"`queuesgd {command}`" in h for h in headings), command
    usage = CLI_MD.split("```", 2)[1]
    assert re.search(rf"^queuesgd {command}\b", usage, re.M), command


def test_readme_cli_list_names_every_subcommand():
    (row,) = [line for line in README.splitlines() if line.startswith("| `queuesgd` CLI |")]
    for command in subcommands():
        assert f"`{command}" in row or f"`queuesgd {command}`" in row, command


def _scheme_rows() -> dict[str, str]:
    table = CLI_MD.split("| `--scheme` | class | parameters (flags) |")[1].split("\n\n")[0]
    return {m.group(1): line for line in table.splitlines() if (m := re.match(r"\| `([a-z-]+)`", line))}


@pytest.mark.parametrize("entry", registry.entries(), ids=lambda e: e.key)
def test_every_scheme_has_a_row_with_every_flag(entry):
    rows = _scheme_rows()
    assert entry.key in rows, entry.key
    row = rows[entry.key]
    assert entry.cls.__name__ in row
    for alias in entry.aliases:
        assert f"`{alias}`" in row, alias
    fusion = CLI_MD.split("The **fusion flags**")[1].split("\n\n")[1]
    for name in entry.cls.parameters():
        if name == "predictor":  # an object: Python only, and the row says so
            assert "Python-only" in row
            continue
        flag = scheme_flag(name)
        assert f"`{flag}" in row or ("the fusion flags" in row and f"`{flag}" in fusion), (entry.key, flag)


def _derive_examples() -> list[tuple[list[str], list[str]]]:
    section = CLI_MD.split("## `queuesgd derive`")[1].split("\n## ")[0]
    out: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line.startswith("$ queuesgd "):
                out.append((shlex.split(line[len("$ queuesgd ") :]), []))
            elif out:
                out[-1][1].append(line)
    return out


def test_derive_section_has_examples():
    assert len(_derive_examples()) >= 8


@pytest.mark.parametrize("argv, shown", _derive_examples(), ids=lambda x: " ".join(x) if x else "-")
def test_derive_examples_run_as_shown(argv, shown):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if shown:  # an error example: the very line shown, exit 2
        assert status == 2 and err.getvalue().splitlines() == shown
    else:
        assert status == 0 and "X = " in out.getvalue(), err.getvalue()
