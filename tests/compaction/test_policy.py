"""compaction-basic's budgets: dsh 0.2.1rc2's arithmetic, defaults and refusals."""

from __future__ import annotations

import pytest

from dshpy.compaction import DEFAULT_RETAIN_RATIO, BasicPolicy, Budgets
from dshpy.errors import CompactionConfigError, ConfigError


def test_the_defaults_are_dshs() -> None:
    policy = BasicPolicy()
    assert (policy.threshold_ratio, policy.effective_retain_ratio, policy.retain_tokens) == (0.8, 0.16, None)
    assert DEFAULT_RETAIN_RATIO == 0.16
    assert (policy.headroom_tokens, policy.summary_max_tokens, policy.compaction_retries) == (65_536, 65_536, 1)


def test_the_threshold_is_the_smaller_of_the_ratio_and_the_room_left_after_output_and_headroom() -> None:
    # dsh's own DeepSeek route: a 1,000,000-token window, 256,000 reserved for output
    assert BasicPolicy().budgets(1_000_000, 256_000) == Budgets(678_464, 119_040)
    # no reservation: the ratio decides
    assert BasicPolicy(headroom_tokens=0, max_tokens=100).budgets(10_000) == Budgets(8_000, 1_600)
    assert BasicPolicy().budgets(131_072, 8_192) == Budgets(57_344, 19_660)


def test_a_fixed_retained_tail_replaces_the_ratio() -> None:
    assert BasicPolicy(retain_tokens=500, headroom_tokens=0, max_tokens=10).budgets(10_000) == Budgets(8_000, 500)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threshold_ratio": 0}, "threshold_ratio"),
        ({"threshold_ratio": 1.5}, "threshold_ratio"),
        ({"retain_ratio": 0.9}, "less than threshold_ratio"),
        ({"retain_ratio": 0.1, "retain_tokens": 10}, "mutually exclusive"),
        ({"retain_tokens": -1}, "retain_tokens"),
        ({"headroom_tokens": -5}, "headroom_tokens"),
        ({"headroom_tokens": 0}, "max_tokens must be set"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"compaction_retries": -1}, "compaction_retries"),
    ],
)
def test_unusable_settings_are_refused_when_made(options: dict[str, object], message: str) -> None:
    with pytest.raises(CompactionConfigError, match=message):
        BasicPolicy(**options)  # type: ignore[arg-type]


def test_a_window_too_small_for_the_policy_is_a_config_error_naming_the_numbers() -> None:
    with pytest.raises(CompactionConfigError, match="65536 headroom tokens leave nothing of a 16000-token"):
        BasicPolicy().budgets(16_000)
    with pytest.raises(CompactionConfigError, match="leaving nothing for messages"):
        BasicPolicy().budgets(8_000, 8_000)
    with pytest.raises(CompactionConfigError, match="retained tokens"):
        BasicPolicy(retain_tokens=9_000, headroom_tokens=0, max_tokens=1).budgets(10_000)
    assert issubclass(CompactionConfigError, ConfigError)
