"""Did-you-mean: which known name a mistyped key, region or choice is taken for."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from edge.regions import AWS_REGIONS
from stack_config.keys import KEY_BY_NAME
from stack_config.suggest import closest, did_you_mean

KNOWN_SETS = {"keys": tuple(KEY_BY_NAME), "regions": tuple(AWS_REGIONS)}


def dropped(name: str) -> Iterator[str]:
    for i in range(len(name)):
        yield name[:i] + name[i + 1:]


def swapped(name: str) -> Iterator[str]:
    for i in range(len(name) - 1):
        yield name[:i] + name[i + 1] + name[i] + name[i + 2:]


def test_the_typos_of_the_operator_report_are_matched():
    assert did_you_mean("originMemoryMB", KEY_BY_NAME, "mcp-edge:") == "; did you mean mcp-edge:originMemoryMb?"
    assert did_you_mean("eu-wset-1", AWS_REGIONS) == "; did you mean eu-west-1?"


def test_every_key_with_a_letter_dropped_or_two_swapped_or_in_other_case_is_matched_to_it():
    for key in KEY_BY_NAME:
        for typo in [*dropped(key), *swapped(key), key.upper(), key.lower()]:
            if typo != key and typo not in KEY_BY_NAME:
                assert closest(typo, KEY_BY_NAME) == key, typo


def test_every_region_with_two_letters_swapped_is_matched_to_it():
    for region in AWS_REGIONS:
        for typo in swapped(region):
            if typo != region:
                assert closest(typo, AWS_REGIONS) == region, typo


def test_a_region_with_a_letter_dropped_is_matched_to_a_region_it_could_come_from():
    # "us-est-1" may be us-east-1 or us-west-1: any region one dropped letter away will do.
    for region in AWS_REGIONS:
        for typo in dropped(region):
            match = closest(typo, AWS_REGIONS)
            assert match is not None and typo in set(dropped(match)), (typo, match)


def test_unrelated_names_get_no_suggestion():
    assert closest("moon-1", AWS_REGIONS) is None
    assert closest("mars-north-1", AWS_REGIONS) is None
    assert closest("colour", KEY_BY_NAME) is None
    assert did_you_mean("colour", KEY_BY_NAME) == ""


@given(st.sampled_from(sorted(KNOWN_SETS)), st.text(max_size=30))
def test_a_suggestion_is_always_a_known_name_other_than_the_word(which: str, word: str):
    known = KNOWN_SETS[which]
    match = closest(word, known)
    assert match is None or (match in known and match != word)


def test_a_dropped_letter_that_leaves_another_keys_letters_is_still_matched_to_its_key():
    # "ervers" holds the letters of "server", but it is "servers" with its first letter dropped.
    assert closest("ervers", KEY_BY_NAME) == "servers"
    assert closest("srever", KEY_BY_NAME) == "server"
