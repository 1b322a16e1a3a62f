"""The bounded memory of recent keys."""

from collections import OrderedDict

from src.utils.recent import keep_recent


def test_the_oldest_written_key_is_forgotten_past_the_limit():
    memory: OrderedDict[str, int] = OrderedDict()
    for key, value in (("a", 1), ("b", 2), ("a", 3), ("c", 4)):
        keep_recent(memory, key, value, 2)
    assert list(memory.items()) == [("a", 3), ("c", 4)]  # rewriting 'a' made 'b' the oldest
