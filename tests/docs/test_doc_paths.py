"""Every file of the repository that README.md and docs/*.md name exists, and no page cites a
script under runs/ (ignored by git: a reader could not run it). Paths written as patterns (`*`,
`{a,b}`, `...`, upper-case placeholders such as `-s18-wsW.csv`) are left out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(
    r"(?<![\w./-])((?:benchmarks|configs|examples|src/rollalloc)/[\w./-]+\.(?:py|sh|yaml|csv|json|md))"
)
ELSEWHERE = {  # files of other repositories, cited as where a peer's setting was read
    "examples/knapsack_trainer/run_knapsack_grpo_7b.sh",  # Knapsack-RL's reference (docs/peers.md)
}
RUNS_SCRIPT = re.compile(r"(?<![\w./-])runs/[\w./-]+\.(?:py|sh)\b")


def test_every_cited_repository_file_exists():
    missing = []
    for page in PAGES:
        for path in CITED.findall(page.read_text(encoding="utf-8")):
            if (
                re.search(r"[*{}]|\.\.\.|[A-Z]\.", path)
                or path in ELSEWHERE
                or (ROOT / path).exists()
            ):
                continue
            missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


def test_no_page_cites_a_script_under_runs():
    cited = [
        f"{page.relative_to(ROOT)}: {m}"
        for page in PAGES
        for m in RUNS_SCRIPT.findall(page.read_text(encoding="utf-8"))
    ]
    assert not cited, (
        "scripts under runs/ are not in git; commit them to benchmarks/:\n" + "\n".join(cited)
    )
