"""hvd_dqn.text: how messages name lists."""
import pytest

from hvd_dqn.text import listed


def test_a_list_is_named_as_a_sentence_names_it():
    assert listed(["QR-DQN"]) == "QR-DQN"
    assert listed(["QR-DQN", "IQN"]) == "QR-DQN and IQN"
    assert listed(["a", "b", "c"], "or") == "a, b or c"


def test_an_empty_list_is_a_programming_error():
    with pytest.raises(ValueError, match="at least one"):
        listed([])
