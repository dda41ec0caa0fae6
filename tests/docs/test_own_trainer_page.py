"""docs/own-trainer.md shows examples/own_trainer.py verbatim (test_doc_examples runs the block)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_shows_the_example_file_verbatim():
    page = (ROOT / "docs" / "own-trainer.md").read_text(encoding="utf-8")
    example = (ROOT / "examples" / "own_trainer.py").read_text(encoding="utf-8")
    assert f"```python\n{example}```" in page, (
        "docs/own-trainer.md: paste examples/own_trainer.py into its last python block again"
    )
