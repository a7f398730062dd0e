"""The three ways XLA prints a collective's devices all read to the same groups."""
import pytest

from assignments.replica_groups import (
    parse_explicit, parse_iota, parse_mesh_form, parse_replica_groups, parse_source_target_pairs,
)


def sorted_groups(groups):
    return sorted(sorted(g) for g in groups)


def test_explicit_lists():
    """Are explicit replica group lists read as written?"""
    assert parse_explicit("{{0,1,2,3},{4,5,6,7}}") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert parse_explicit("{}") == []


@pytest.mark.parametrize("text, groups", [
    ("[2,4]<=[8]", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("[4,2]<=[2,4]T(1,0)", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("[1,8]<=[8]", [list(range(8))]),
])
def test_iota_form(text, groups):
    """Is the iota form (reshape, transpose, regroup) expanded correctly?"""
    assert parse_iota(text) == groups


@pytest.mark.parametrize("text, groups", [
    # the named-axes form printed by newer XLA
    ("mesh['X'=2,'Y'=4] {'Y'}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("mesh['X'=2,'Y'=4] {'X'}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("mesh['X'=2,'Y'=4] {'X','Y'}", [list(range(8))]),
    ("mesh['X'=8,'Y'=1] {'Y'}", [[i] for i in range(8)]),
    # XLA's own mesh, permuted onto the devices (printed by JAX 0.10's XLA)
    ("mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0)) {'axis_0'}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    # a sub-axis: the minor half of Y
    ("mesh['X'=2,'Y'=4] {'Y':(2)2}", [[0, 1], [2, 3], [4, 5], [6, 7]]),
    # the major half of Y
    ("mesh['X'=2,'Y'=4] {'Y':(1)2}", [[0, 2], [1, 3], [4, 6], [5, 7]]),
])
def test_mesh_form(text, groups):
    """Are named mesh axes, device permutations and sub-axes read to the right devices?"""
    assert sorted_groups(parse_mesh_form(text)) == sorted_groups(groups)


def test_forms_agree_in_attribute_text():
    """Do all three forms of one grouping, inside an instruction's attributes, agree?"""
    forms = [
        "channel_id=1, replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true",
        "channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true",
        "channel_id=1, replica_groups=mesh['X'=2,'Y'=4] {'X'}, use_global_device_ids=true",
    ]
    read = [sorted_groups(parse_replica_groups(f)) for f in forms]
    assert read[0] == read[1] == read[2]


def test_no_replica_groups_and_pairs():
    """Are a missing attribute and source-target pairs told apart?"""
    assert parse_replica_groups("channel_id=1, dimensions={0}") is None
    assert parse_source_target_pairs("source_target_pairs={{0,3},{1,0}}, x=1") == [(0, 3), (1, 0)]
