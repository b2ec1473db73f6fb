"""Structures on a Redis Cluster: each in one slot, many spread over the nodes.

(The whole conformance suite also runs on the cluster: backend ``redis-cluster``.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.crc import key_slot

from sharedq.cf import ById, Compare, Head, MonitorState, StructureParams, open_facility
from sharedq.cf.redis import RedisFacility
from sharedq.cf.redis.keys import meta_key
from sharedq.testing.redis_server import RedisCluster

NAMES = [f"QSG{n}" for n in range(12)]


@pytest.fixture
def cluster(redis_cluster: RedisCluster) -> Iterator[RedisCluster]:
    redis_cluster.flush()
    yield redis_cluster
    redis_cluster.flush()


def test_structures_spread_over_the_nodes_each_whole_on_one(cluster: RedisCluster) -> None:
    with open_facility(cluster.url) as facility:
        for name in NAMES:
            facility.create(StructureParams.for_capacity(name, list_count=4, entries=9, elements=9))
            with facility.connect(name, "QM1") as qm1, facility.connect(name, "QM2") as qm2:
                reg = qm2.monitor_list(1)
                put = qm1.write(1, b"\x04" + bytes(15), name.encode())
                qm1.monitor_list(2)
                (event,) = qm2.events_nowait()
                assert (event.monitor_id, event.state, event.seq) == (
                    reg.monitor_id,
                    MonitorState.NONEMPTY,
                    put.seq,
                )
                got = qm2.move(Head(1, key=b"\x0a" + bytes(15), compare=Compare.LE), 2)
                assert got is not None and got.entry.data == name.encode()
                assert [e.state for e in qm1.wait_events(timeout=5)] == [MonitorState.NONEMPTY]
                qm1.lock(0)  # keys of the lock table, the users, ... all in the slot
        assert facility.structure_names() == sorted(NAMES)
    homes = {name: cluster.node_of(meta_key(name)) for name in NAMES}
    assert len(set(map(id, homes.values()))) == len(cluster.nodes)  # every node holds some
    for node in cluster.nodes:
        keys = node.command("KEYS", "sq:*")
        assert isinstance(keys, list)
        for raw in keys:
            name = raw.decode().split("{")[1].split("}")[0]
            assert homes[name] is node, f"{raw!r} is not on its structure's node"


def test_a_moved_structure_is_followed(cluster: RedisCluster) -> None:
    """After its slot is migrated (quiesced, as resharding must be), users follow MOVED."""
    with RedisFacility.from_url(cluster.url) as facility:
        facility.create(StructureParams.for_capacity("QSGM", list_count=2, entries=9, elements=9))
        with facility.connect("QSGM", "QM1") as qm1:
            entry = qm1.write(0, bytes(16), b"before the move").entry
        source = cluster.node_of(meta_key("QSGM"))
        target = next(node for node in cluster.nodes if node is not source)
        cluster.move_slot(key_slot(meta_key("QSGM").encode()), source, target)
        # The facility's slot map is stale now: the old node answers MOVED.
        with facility.connect("QSGM", "QM1") as again:
            assert again.read(ById(entry.entry_id)) == entry
            again.write(0, bytes(16), b"after the move")
            assert [e.data for e in again.scan(0)] == [b"before the move", b"after the move"]
        assert facility.exists("QSGM")
        assert facility.structure_names() == ["QSGM"]
        facility.delete("QSGM")
