"""docs/options.md is generated from the strategies' Config dataclasses and may not drift."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rollalloc import docs_options
from rollalloc.allocator import available_strategies, get_strategy

ROOT = Path(__file__).resolve().parents[2]


def test_committed_options_page_is_the_generated_one():
    committed = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert committed == docs_options.generate(), (
        "docs/options.md is out of date: run `python -m rollalloc.docs_options`"
    )


def test_every_option_of_every_strategy_is_in_the_table_with_a_doc():
    import rollalloc.sim.oracle  # noqa: F401  (the simulator-only strategies)

    text = docs_options.generate()
    for name in available_strategies():
        config = get_strategy(name).Config
        assert f"## `{name}`" in text
        docs = {}
        for klass in reversed(config.__mro__):
            if dataclasses.is_dataclass(klass):
                docs.update(docs_options._field_docs(klass))
        for f in dataclasses.fields(config):
            assert f"| `{f.name}` |" in text, f"{name}: option {f.name} missing from the table"
            assert docs[f.name][1], f"{name}: option {f.name} has no docstring"


def test_check_mode_reports_a_stale_page(tmp_path):
    page = tmp_path / "options.md"
    assert docs_options.main(["--out", str(page), "--check"]) == 1  # missing
    assert docs_options.main(["--out", str(page)]) == 0
    assert docs_options.main(["--out", str(page), "--check"]) == 0
    page.write_text(page.read_text() + "edited by hand\n")
    assert docs_options.main(["--out", str(page), "--check"]) == 1


def test_paired_fields_share_their_docstring():
    @dataclasses.dataclass
    class Example:
        p_step: float = 0.1
        """Step."""
        p_min: float = 0.0
        p_max: float = 1.0
        """Range."""
        prior_alpha: float = 1.0
        """Prior."""
        prior_beta: float = 1.0
        decay: float = 1.0
        """Decay."""

    docs = {k: v[1] for k, v in docs_options._field_docs(Example).items()}
    assert docs == {
        "p_step": "Step.",
        "p_min": "Range.",
        "p_max": "Range.",
        "prior_alpha": "Prior.",
        "prior_beta": "Prior.",
        "decay": "Decay.",
    }
