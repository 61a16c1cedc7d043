import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.units import format_rate, format_size, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(
    ("text", "bps"),
    [("400Gbps", 400e9), ("100G", 100e9), ("1.6Tbps", 1.6e12), ("50GBps", 400e9), ("25Mbps", 25e6), (1e9, 1e9)],
)
def test_parse_rate(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize(("text", "s"), [("1us", 1e-6), ("2.5ms", 2.5e-3), ("10ns", 1e-8), ("0", 0.0), (3, 3.0)])
def test_parse_time(text, s):
    assert parse_time(text) == pytest.approx(s)


@pytest.mark.parametrize(
    ("text", "n"), [("64KiB", 65536), ("1MB", 10**6), ("1K", 1024), ("8GiB", 8 * 2**30), (4096, 4096), ("1.5KiB", 1536)]
)
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize(
    ("fn", "value", "needle"),
    [
        (parse_rate, "fast", "link.rate ('fast') is not a rate"),
        (parse_rate, "10Gbpx", "unknown rate unit"),
        (parse_rate, "0Gbps", "must be a positive rate"),
        (parse_time, "-1us", "link.rate ('-1us') is negative; a time cannot be"),
        (parse_size, "-1MiB", "link.rate ('-1MiB') is negative; a size cannot be"),
        (parse_size, "1.3B", "whole number"),
        (parse_size, "12 parsecs", "unknown size unit"),
    ],
)
def test_bad_values_name_the_field(fn, value, needle):
    with pytest.raises(ScenarioError) as exc:
        fn(value, field="link.rate")
    assert needle.split(" (")[0] in str(exc.value) or needle in str(exc.value)
    assert "link.rate" in str(exc.value)


def test_format_round_trip():
    assert format_size(1536) == "1.5KiB"
    assert format_rate(4e11) == "400Gbps"
