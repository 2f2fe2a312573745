import pytest

from archsim.units import Dim, parse_quantity


@pytest.mark.parametrize(
    "text,dim,value",
    [
        ("4.8 TB/s", Dim.BYTES_PER_S, 4.8e12),
        ("60 MiB", Dim.BYTES, 60 * 2**20),
        ("228 KiB", Dim.BYTES, 228 * 1024),
        ("141 GB", Dim.BYTES, 141e9),
        ("1.98 GHz", Dim.HZ, 1.98e9),
        ("700 ns", Dim.SECONDS, 700e-9),
        ("3.9 us", Dim.SECONDS, 3.9e-6),
        ("6.25 Gbps", Dim.BYTES_PER_S, 6.25e9 / 8),
        ("6.25 Gbps", Dim.BITS_PER_S, 6.25e9),
        ("0 s", Dim.SECONDS, 0.0),
    ],
)
def test_parse(text, dim, value):
    assert parse_quantity(text, dim) == pytest.approx(value)


@pytest.mark.parametrize(
    "text,dim,fragment",
    [
        ("4.8 TB/s", Dim.BYTES, "bytes/s, but bytes is due"),
        ("60", Dim.BYTES, "a unit is required"),
        (60, Dim.BYTES, "a unit is required"),
        ("60 furlongs", Dim.BYTES, "unknown unit"),
        ("fast", Dim.HZ, "not a quantity"),
        (True, Dim.HZ, "expected a quantity"),
    ],
)
def test_parse_errors_quote_value(text, dim, fragment):
    with pytest.raises(ValueError) as err:
        parse_quantity(text, dim)
    assert fragment in str(err.value)
    assert repr(text) in str(err.value)
