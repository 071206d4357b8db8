"""How whole captures are packed into Spark tasks (no Spark needed)."""

from __future__ import annotations

import pytest

from amqpcap.spark import plan, storage

MB = 1 << 20


def _captures(sizes, gzip=()):
    return [
        plan.Capture(
            f"c{i:03d}.pcap", storage.Location(f"/x/c{i:03d}.pcap", f"/x/c{i:03d}.pcap"), s, i in gzip
        )
        for i, s in enumerate(sizes)
    ]


@pytest.mark.parametrize("cores", [1, 2, 3, 8])
def test_a_large_set_is_two_tasks_a_core(cores):
    assert plan.task_count(4000 * MB, cores) == 2 * cores


@pytest.mark.parametrize(
    ("total", "cores", "want"), [(1, 2, 1), (8 * MB, 2, 1), (9 * MB, 2, 2), (17 * MB, 2, 4), (17 * MB, 3, 3)]
)
def test_small_sets_make_fewer_tasks_but_a_multiple_of_the_cores(total, cores, want):
    assert plan.task_count(total, cores) == want


def test_groups_are_balanced_by_bytes_largest_first_and_hold_every_capture_once():
    caps = _captures([100 * MB] * 31 + [30 * MB, 7 * MB, 250 * MB])
    groups = plan.pack(caps, 4)
    assert len(groups) == 4
    assert sorted(c.name for g in groups for c in g) == sorted(c.name for c in caps)
    sizes = [sum(c.size for c in g) for g in groups]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] - sizes[-1] <= 100 * MB  # at most one of the many equal captures apart


def test_gzip_captures_are_tasks_of_their_own_beside_the_groups():
    caps = _captures([5 * MB, 6 * MB, 7 * MB, 40 * MB], gzip={3})
    groups = plan.pack(caps, 2)
    assert [[c.name for c in g] for g in groups] == [["c003.pcap"], ["c001.pcap", "c000.pcap"], ["c002.pcap"]]
