"""Every code example of README.md and docs/*.md is run or, for commands, validated.

Python: the ```python blocks of one page run in order as one script (later blocks see the names of
earlier ones), in a fresh interpreter whose working directory is an empty temporary folder. A block
that cannot run on its own starts with the marker line `# not run: <why>`; such exceptions are
listed in NOT_RUN below, so a new one is a deliberate change of this test.

Commands: every `rollalloc ...` line of a ```bash / ```sh / ```console or unlabeled block is parsed by
the real argparse parser (flags, types, choices) and then put through the checks the command makes
before any expensive work (config fields and ranges, budget, strategy names and options, seeds,
preset), without running it. On one page the runs' --out directories must differ (a command never
overwrites a run), and `rollalloc report DIR` must name a directory an earlier command writes.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN_MARKER = "# not run:"
NOT_RUN = {  # page: blocks marked `# not run:`, each with its reason in the marker line
    "docs/trl.md": 1,  # needs a model, a dataset and reward functions; examples/trl_pilot_commit.py
    "docs/strategies.md": 1,  # a pytest file importing the user's own package
}
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_LANGS = {"bash", "sh", "shell", "console", ""}


def code_blocks(page: Path) -> list[tuple[str, int, str]]:
    """(language, line number of the fence, code) of every fenced block of `page`."""
    text = page.read_text(encoding="utf-8")
    return [
        (m.group(1).lower(), text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in FENCE.finditer(text)
    ]


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def python_pages() -> list[Path]:
    return [p for p in PAGES if any(lang == "python" for lang, _, _ in code_blocks(p))]


@pytest.mark.parametrize("page", python_pages(), ids=rel)
def test_python_examples_run(page, tmp_path):
    parts, skipped = [], []
    for lang, line, code in code_blocks(page):
        if lang != "python":
            continue
        first = code.lstrip().splitlines()[0] if code.strip() else ""
        if first.startswith(NOT_RUN_MARKER):
            reason = first[len(NOT_RUN_MARKER) :].strip()
            assert reason, f"{rel(page)}:{line}: `# not run:` needs a reason"
            skipped.append(line)
            continue
        parts.append(f"# ---- {rel(page)}:{line}\n{code}")
    assert len(skipped) == NOT_RUN.get(rel(page), 0), (
        f"{rel(page)}: blocks marked not run at lines {skipped}; update NOT_RUN in this test "
        "if that is deliberate (keep such exceptions few)"
    )
    if not parts:
        return
    script = tmp_path / "doc_example.py"
    script.write_text("\n".join(parts), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"{rel(page)}: its python examples failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(\S+)$")


def shell_commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, argv without the leading `rollalloc`) of every rollalloc command in shell blocks.

    Shell variables set in the block (`S=grpo,dapo`) are substituted; a usage synopsis's optional
    parts (`[--set KEY=VALUE]`) are checked as if given."""
    out = []
    for lang, line, code in code_blocks(page):
        if lang not in SHELL_LANGS:
            continue
        variables: dict[str, str] = {}
        lines = code.splitlines()
        i = 0
        while i < len(lines):
            start, cmd = i, lines[i]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i]
            i += 1
            cmd = cmd.strip()
            if cmd.startswith("$ "):
                cmd = cmd[2:]
            if m := ASSIGN.match(cmd):
                variables[m.group(1)] = m.group(2)
                continue
            if not cmd.startswith(("rollalloc ", ".venv/bin/rollalloc ")):
                continue
            words = shlex.split(cmd, comments=True)
            words = [w.strip("[]") for w in words]
            for k, v in variables.items():
                words = [w.replace(f"${k}", v).replace(f"${{{k}}}", v) for w in words]
            if words and words[0] in ("rollalloc", ".venv/bin/rollalloc"):
                out.append((line + 1 + start, words[1:]))
    return out


def command_pages() -> list[Path]:
    return [p for p in PAGES if shell_commands(p)]


def validate(argv: list[str]) -> tuple[str, str | None, bool]:
    """Parse and pre-check one command as the CLI does before its expensive part; returns
    (command, the --out it writes or the dir it reads, whether it resumes)."""
    from rollalloc.cli import build_parser

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        raise AssertionError(f"argparse refused it (exit {e.code})") from None
    cmd = args.command
    if cmd == "train":
        from rollalloc.train.cli import _base_from_args
        from rollalloc.train.config import config_from_dict
        from rollalloc.train.preflight import check_config

        cfg = config_from_dict(_base_from_args(args))
        check_config(cfg)
        return cmd, str(cfg.out), bool(args.resume)
    if cmd == "compare":
        from rollalloc.preflight import parse_names, parse_seeds
        from rollalloc.train.cli import _base_from_args
        from rollalloc.train.compare import run_config
        from rollalloc.train.preflight import check_config

        base = _base_from_args(args)
        base.pop("out", None)
        assert "budget_rollouts" in base or "max_steps" in base, "compare needs a budget"
        names = parse_names(args.strategies, "--strategies")
        assert "grpo" in names, "compare needs grpo (the baseline)"
        for s in names:
            for seed in parse_seeds(args.seeds, "--seeds"):
                check_config(run_config(base, s, seed, Path(args.out)))
        return cmd, args.out, bool(args.resume)
    if cmd == "simulate":
        from rollalloc.sim.cli import check_strategies, resolve_settings
        from rollalloc.sim.policy import load_preset

        st = resolve_settings(args)
        preset = load_preset(st["preset"])
        sim_cfg = preset.sim.replace(**{"ref_group_size": st["group_size"], **st["sim"]})
        check_strategies(st, preset, sim_cfg)
        return cmd, st["out"], False
    if cmd == "demo":
        return cmd, args.out, bool(args.resume)
    if cmd == "report":
        return cmd, args.dir, True
    return cmd, None, False


@pytest.mark.parametrize("page", command_pages(), ids=rel)
def test_rollalloc_commands_parse_and_pass_their_checks(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # config files in the commands are relative to the repository
    written: dict[str, int] = {}  # --out: the line that writes it
    readable = {"runs/demo"}  # `make demo` writes runs/demo
    problems = []
    for line, argv in shell_commands(page):
        where = f"{rel(page)}:{line}: rollalloc {' '.join(argv)}"
        try:
            cmd, out, reads = validate(argv)
        except (AssertionError, ValueError, FileNotFoundError) as e:
            problems.append(f"{where}\n    {e}")
            continue
        if out is None:
            continue
        out = out.rstrip("/")
        if cmd == "report":
            if out not in written and out not in readable:
                problems.append(f"{where}\n    reports on {out}, which no command above writes")
        elif not reads and out in written:
            problems.append(f"{where}\n    --out {out} is written by line {written[out]} already")
        else:
            written[out] = line
    assert not problems, "documented commands that would fail:\n" + "\n".join(problems)


def test_the_command_extractor_joins_continuations_and_drops_comments(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nrollalloc train --seed 0 \\\n    --out runs/x   # a comment\nmake test\n```\n"
        "```python\nrollalloc = 1\n```\n"
    )
    assert shell_commands(page) == [(2, ["train", "--seed", "0", "--out", "runs/x"])]


def test_a_command_without_a_budget_is_caught():
    with pytest.raises(ValueError, match="budget_rollouts or max_steps"):
        validate(["train", "--strategy", "pilot-commit", "--out", "runs/x"])
    with pytest.raises(AssertionError, match="argparse"):
        validate(["train", "--no-such-flag"])
