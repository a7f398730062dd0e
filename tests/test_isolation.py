"""The child that runs a submission has no network and cannot import the graders."""
import os
import socket

import pytest

from graders import grade_submission
from graders.sandbox import namespaces

PROBE = '''
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    NETWORK = True
except OSError:
    NETWORK = False
try:
    import graders
    GRADERS = True
except ImportError:
    GRADERS = False

import jax
from jax.sharding import PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    if NETWORK or GRADERS:
        raise RuntimeError("the network or the graders were reachable")
    return jax.shard_map(lambda a: a.mean(axis=0, keepdims=True), mesh=mesh,
                         in_specs=P("X", "Y"), out_specs=P("X", "Y"))(A)
'''


@pytest.mark.skipif("-n" not in namespaces(), reason="this OS does not allow a network namespace")
def test_no_network_and_no_graders(tmp_path):
    """Does a submission that connects to a listening local port, or imports graders, fail to?"""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        path = tmp_path / "probe.py"
        path.write_text(PROBE.format(port=server.getsockname()[1]))
        result = grade_submission(str(path), "problem1", only=["shard_average_shard_map"])
    finally:
        server.close()
    assert result.score == 2, result.to_text()


def test_graders_not_importable_even_with_network(tmp_path, monkeypatch):
    """Without the network namespace too, is `import graders` refused in the child?"""
    from graders.harness import Limits

    path = tmp_path / "probe.py"
    path.write_text(PROBE.format(port=1).replace("NETWORK = True", "NETWORK = False"))
    result = grade_submission(str(path), "problem1", only=["shard_average_shard_map"],
                              limits=Limits(isolate=False))
    assert result.score == 2, result.to_text()
