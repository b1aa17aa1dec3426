"""Taxonomy coverage: each bug declares the published leaves it plants, and
``results/coverage.md`` is what those declarations tally to."""

from __future__ import annotations

from pathlib import Path

import pytest

from bugzoo.bugs import Bug, SymptomCheck, list_bugs
from bugzoo.taxonomy import BY_KEY, LEAVES
from bugzoo.teach.coverage import COVERAGE_FILE, coverage_page, leaf_table, source_tallies

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_the_committed_coverage_page_is_the_declarations_tallied():
    committed = (RESULTS / COVERAGE_FILE).read_text()
    assert coverage_page(list_bugs(), "bugzoo results coverage") == committed


def test_the_first_release_tallies_as_the_reference_mapped_it():
    """The 43 bugs of bugzoo-bench 1.0, declared from the published mapping, give back its
    coverage table (the counts below are the mapping's own, in scope, distributed in
    brackets): the key list and the declarations agree with the source."""
    first = [b for b in list_bugs() if b.since == "1.0"]
    assert len(first) == 43
    rows = source_tallies(leaf_table(first)).set_index("source")
    expected = {  # (in scope, literal, partial, uncovered)
        "Humbatova et al., preprocessing examples one by one": ("98 (+1)", "19 (+1)", "14", "65"),
        "Humbatova et al., preprocessing folded into its 2 leaves": ("85 (+1)", "17 (+1)", "12",
                                                                     "56"),
        "TrainCheck, named silent errors": ("8 (+4)", "2 (+1)", "2 (+3)", "4"),
        "DeepFD, fault types": ("5", "2", "0", "3"),
        "AUTOTRAINER, training problems": ("5", "4", "0", "1"),
        "AUTOTRAINER, labels in its current code": ("8", "6", "0", "2"),
        "Jahangirova et al., types with 3+ faults": ("22", "4", "5", "13"),
        "LLM-era incidents": ("11", "0", "3", "8"),
    }
    for source, counts in expected.items():
        row = rows.loc[source]
        assert tuple(str(row[c]) for c in ("in scope", "literal", "partial", "uncovered")) \
            == counts, source


def test_keys_are_unique_and_every_source_is_listed():
    assert len(BY_KEY) == len(LEAVES)
    assert {leaf.source for leaf in LEAVES} == set("HTDAJL")
    assert sum(1 for leaf in LEAVES if leaf.source == "H" and leaf.scope == "in") == 98
    assert len({leaf.folded for leaf in LEAVES if leaf.source == "H" and leaf.scope == "in"}) \
        == 85


@pytest.mark.parametrize(("taxonomy", "message"), [
    ({"H.model.activation.wrong_typ": "literal"},
     "unknown taxonomy key 'H.model.activation.wrong_typ' \\(did you mean "
     "'H.model.activation.wrong_type'\\?\\)"),
    ({"J.HNE": "partly"}, "neither 'literal' nor 'partial: <how the plant differs>'"),
    ({"J.HNE": "partial: "}, "neither 'literal' nor 'partial"),
])
def test_a_declaration_names_a_known_leaf_and_how_it_is_planted(taxonomy, message):
    with pytest.raises(ValueError, match=message):
        Bug(id="x", title="x", category="loss", symptom="x", explanation="x", buggy="x",
            fixed="x", check=SymptomCheck("final_val_loss", "higher"), taxonomy=taxonomy)


def test_the_catalogue_meets_its_coverage_goals_and_readme_quotes_them():
    """Catalogue III's goals, read off the declarations: at least half of Humbatova et al.'s
    in-scope leaves (folded, as her replication package counts them), every in-scope
    TrainCheck error, all five AUTOTRAINER problems and at least 8 of Jahangirova et al.'s 10
    most frequent types, each planted literally; README quotes the committed page's counts."""
    rows = source_tallies(leaf_table(list_bugs())).set_index("source")
    literal = lambda source: int(str(rows.loc[source, "literal"]).split()[0])  # noqa: E731
    humbatova = literal("Humbatova et al., preprocessing folded into its 2 leaves")
    assert humbatova * 2 >= 85
    assert literal("TrainCheck, named silent errors") == 8
    assert literal("AUTOTRAINER, training problems") == 5
    frequent = literal("Jahangirova et al., the 10 most frequent types")
    assert frequent >= 8
    readme = " ".join((RESULTS.parent / "README.md").read_text().split())
    assert (f"plants literally {humbatova} of the 85 in-scope leaves of Humbatova et al.'s "
            "taxonomy") in readme
    assert f"and {frequent} of the 10 fault types Jahangirova et al. count most" in readme
