import threading

import pytest

from nmt.data.prefetch import Prefetcher


def test_items_arrive_in_order_with_what_was_built_for_them():
    built_on = set()

    def build(plan):
        built_on.add(threading.current_thread().name)
        return plan * plan
    with Prefetcher(iter(range(50)), build, depth=3) as items:
        assert list(items) == [(i, i * i) for i in range(50)]
    assert built_on == {"batch-prefetch"}  # off the consumer's thread


def test_an_error_while_planning_or_building_is_raised_in_the_consumer_at_its_item():
    def plans():
        yield from range(3)
        raise ValueError("plan broke")

    seen = []
    with pytest.raises(ValueError, match="plan broke"), Prefetcher(plans(), lambda p: p) as items:
        for plan, _ in items:
            seen.append(plan)
    assert seen == [0, 1, 2]
    with pytest.raises(ZeroDivisionError), Prefetcher(iter([1, 0]), lambda p: 1 / p) as items:
        list(items)


def test_leaving_early_stops_the_thread_even_with_a_full_queue():
    planned = []

    def plans():
        for i in range(10_000):
            planned.append(i)
            yield i
    with Prefetcher(plans(), lambda p: p, depth=2) as items:
        for plan, _ in items:
            if plan == 5:
                break
        thread = items._thread
    assert not thread.is_alive()
    assert len(planned) < 20  # it ran at most a few items ahead, not through the whole plan
