"""Metric and binary prefixes: KB is 1000 bytes and KiB 1024, and a mistake says which is which."""

import pytest

from archsim.units import PREFIX_RULE, Dim, parse_quantity


def test_metric_and_binary_prefixes():
    """kB = KB = 10^3 B; KiB = 2^10 B; MB = 10^6 B; MiB = 2^20 B; 6.25 Gbps = 6.25e9 / 8 B/s."""
    assert parse_quantity("60 KB", Dim.BYTES) == parse_quantity("60 kB", Dim.BYTES) == 60_000
    assert parse_quantity("60 KiB", Dim.BYTES) == 61_440
    assert parse_quantity("2 MB", Dim.BYTES) == 2_000_000 and parse_quantity("2 MiB", Dim.BYTES) == 2_097_152
    assert parse_quantity("6.25 Gbps", Dim.BYTES_PER_S) == pytest.approx(781_250_000)


@pytest.mark.parametrize("text", ["60 kib", "60 MIB", "4 gb"])
def test_a_prefix_in_the_wrong_case_names_the_rule(text):
    with pytest.raises(ValueError) as err:
        parse_quantity(text, Dim.BYTES)
    assert PREFIX_RULE in str(err.value) and str(err.value).endswith(f"(got {text!r})")


def test_an_unknown_unit_does_not():
    with pytest.raises(ValueError) as err:
        parse_quantity("60 furlongs", Dim.BYTES)
    assert PREFIX_RULE not in str(err.value)
