"""What of the rule corpora runs on the older stack (Python 3.11, JAX 0.10): a small set of
compiled programs per rule, as issue 50 asked, beside every honest design.

Every rule's logic has fast unit tests on hand-built analyses (`tests/unit/test_rules.py`). What
the compiled corpora add on a second JAX is how that XLA writes the programs the rules read
(replica groups as lists, iota or mesh axes, fusions, loops). So on 3.11:
- each rule (or kit check) that a corpus file of an assignment breaks meets one such file,
  compiled by that JAX (`RULE_SAMPLES`: assignment -> rule id -> the test; a test can sample
  several rules). The fixture `rule_sample_met` (tests/conftest.py) fails the test when its
  gradings no longer find a problem of every rule named for it here;
- every honest design that must earn full marks runs (`HONEST_DESIGNS`): an unusual spelling
  is where a JAX's own way of writing a program turns into a false fail (issue 50's fused
  block products and routing bookkeeping).
The other corpus tests (more files breaking the same rules, the verdicts of every file) run on
Python 3.12, the newest JAX, where the whole suite runs: `tests/conftest.py` marks them
`more_corpora`, and `.ci/run` leaves that marker out on 3.11. `make test` runs everything.

Chosen from a measured run (each test's CPU and the rule ids of its gradings' problems): for
each (assignment, rule) pair, the cheapest test that breaks it, several pairs at once where one
test does. A new corpus test runs on 3.12 only unless it is named here. `python
benchmarks/rule_samples.py` measures again and prints the pairs a corpus test breaks that no
test here samples (with the cheapest test that would), and the honest designs not listed.
"""
from __future__ import annotations

RULE_SAMPLES: dict[str, dict[str, str]] = {
    "collectives": {
        "C003": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[plain_jit]",
        "C005": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[hardcoded_ny]",
        "C006": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[bidirectional_full_blocks]",
        "E001": "test_collectives.py::test_stub_scores_zero",
        "E002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[hardcoded_ny]",
        "H002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[ring_walks_the_other_way]",
        "P002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[plain_jit]",
        "R001": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[bidirectional_one_way_on_odd_rings]",
        "R002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[hardcoded_ny]",
        "R003": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[bidirectional_one_way_on_odd_rings]",
        "S002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[plain_jit]",
        "S005": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[ring_of_sharded_rolls]",
        "S006": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[psum_inside_inner_jit]",
        "V002": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[hardcoded_ny]",
        "V005": "test_collectives.py::test_each_mistake_loses_its_points_with_its_message[ring_walks_the_other_way]",
    },
    "problem1": {
        "C001": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[replicated_output]",
        "E001": "test_graders_problem1.py::test_wrong_signature",
        "E002": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[raises]",
        "E004": "test_graders_problem1.py::test_malformed_notebook_gets_zero",
        "H001": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[ignores_inputs]",
        "P001": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[ignores_inputs]",
        "P002": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[identity_shard_map]",
        "S001": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[jit_part_uses_shard_map]",
        "S003": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[identity_shard_map]",
        "V001": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[returns_dict]",
        "V002": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[wrong_shape]",
        "V003": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[wrong_dtype]",
        "V004": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[replicated_output]",
        "V005": "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[ignores_inputs]",
    },
    "problem2": {
        "C009": "test_problem2.py::test_results_gathered_over_x_are_named_as_results",
        "C010": "test_problem2.py::test_experts_that_cross_x_in_any_disguise_are_refused[experts_tainted_all_to_all-ops2]",
        "E001": "test_problem2.py::test_release_stub_gets_zero",
        "M002": "test_problem2.py::test_experts_moved_by_jit_around_the_shard_map_are_refused",
        "P002": "test_problem2.py::test_experts_moved_by_jit_around_the_shard_map_are_refused",
        "S004": "test_problem2.py::test_experts_moved_by_jit_around_the_shard_map_are_refused",
        "S005": "test_problem2.py::test_tokens_sent_as_integers_by_permutes_are_no_all_to_all_of_the_tokens[tokens_by_permutes_beside_a_decoy]",
    },
    "problem3": {
        "C003": "test_problem3.py::test_psum_then_slice_reduce_scatter",
        "C004": "test_problem3.py::test_an_all_to_all_of_copies_is_an_all_gather",
        "C005": "test_problem3.py::test_psum_then_slice_reduce_scatter",
        "C006": "test_problem3.py::test_psum_over_the_wrong_axis_is_named",
        "C007": "test_problem3.py::test_single_psum_is_not_split",
        "E001": "test_problem3.py::test_stub_scores_zero",
        "E002": "test_problem3.py::test_psum_over_the_wrong_axis_with_checks_on_is_explained",
        "H002": "test_problem3.py::test_a_ring_walking_the_other_way_says_which_way_the_chunks_went",
        "V005": "test_problem3.py::test_psum_over_the_wrong_axis_is_named",
        "W002": "test_problem3.py::test_psum_then_slice_reduce_scatter",
        "W003": "test_problem3.py::test_single_psum_is_not_split",
        "W004": "test_problem3.py::test_psum_then_slice_reduce_scatter",
    },
    "problem4": {
        "C003": "test_problem4.py::test_one_way_submitted_as_bidirectional",
        "C005": "test_problem4.py::test_one_way_submitted_as_bidirectional",
        "E001": "test_problem4.py::test_stub_scores_zero",
        "H002": "test_problem4.py::test_even_only_halves_fail_exactly_on_odd_blocks[allgather_matmul_bidirectional]",
        "R001": "test_problem4.py::test_one_way_submitted_as_bidirectional",
        "R002": "test_problem4.py::test_permutes_that_jump_devices_are_no_ring_steps",
        "R003": "test_problem4.py::test_one_way_submitted_as_bidirectional",
        "R004": "test_problem4.py::test_uneven_split_both_ways",
        "V002": "test_problem4.py::test_even_only_halves_fail_exactly_on_odd_blocks[reducescatter_matmul_bidirectional]",
        "V005": "test_problem4.py::test_even_only_halves_fail_exactly_on_odd_blocks[allgather_matmul_bidirectional]",
        "W002": "test_problem4.py::test_one_way_submitted_as_bidirectional",
        "W004": "test_problem4.py::test_one_way_submitted_as_bidirectional",
    },
    "training": {
        "C003": "test_training.py::test_replicated_weights_have_the_wrong_sharding",
        "C004": "test_training.py::test_a_sum_over_y_instead_of_the_ring_loses_communication[plain_jit_grads]",
        "C006": "test_training.py::test_a_sum_over_y_instead_of_the_ring_loses_communication[plain_jit_grads]",
        "C014": "test_training.py::test_hard_coded_ring_size",
        "C015": "test_training.py::test_replicated_weights_have_the_wrong_sharding",
        "C016": "test_training.py::test_replicated_weights_have_the_wrong_sharding",
        "E001": "test_training.py::test_stub_scores_zero",
        "E002": "test_training.py::test_hard_coded_ring_size",
        "H001": "test_training.py::test_local_mean_over_counts_and_the_hint_says_so",
        "H002": "test_training.py::test_hard_coded_ring_size",
        "R002": "test_training.py::test_hard_coded_ring_size",
        "S001": "test_training.py::test_jit_step_written_with_shard_map_breaks_s001",
        "V004": "test_training.py::test_replicated_weights_have_the_wrong_sharding",
        "V005": "test_training.py::test_hard_coded_ring_size",
        "W005": "test_training.py::test_a_sum_over_y_instead_of_the_ring_loses_communication[plain_jit_grads]",
    },
    "warmup": {
        "C003": "test_warmup.py::test_layer_that_gathers_the_weights_loses_the_communication_half",
        "C005": "test_warmup.py::test_layer_that_gathers_the_weights_loses_the_communication_half",
        "C008": "test_warmup.py::test_layer_without_its_constraints_does_not_shard_the_work",
        "E001": "test_warmup.py::test_release_stub_gets_zero",
        "E002": "test_warmup.py::test_placing_inside_jit_fails_clearly",
        "H001": "test_warmup.py::test_pmap_update_ported_as_is_steps_n_times_too_far",
        "P002": "test_warmup.py::test_layer_that_gathers_the_weights_loses_the_communication_half",
        "S003": "test_warmup.py::test_a_psum_the_compiler_drops_leaves_the_work_to_jit[total_sum-reduce]",
        "S005": "test_warmup.py::test_layer_that_gathers_the_weights_loses_the_communication_half",
        "V001": "test_warmup.py::test_place_must_return_an_array_jax_made",
        "V002": "test_warmup.py::test_convolution_written_for_the_visible_sizes_fails_elsewhere",
        "V004": "test_warmup.py::test_wrong_sharding_on_an_explicit_mesh_points_at_out_sharding",
        "V005": "test_warmup.py::test_pmap_update_ported_as_is_steps_n_times_too_far",
        "W001": "test_warmup.py::test_layer_without_its_constraints_does_not_shard_the_work",
    },
}
"""assignment -> rule id -> the corpus test (a node id under tests/) that breaks it, on 3.11 too."""

HONEST_DESIGNS: tuple[str, ...] = (
    "test_collectives.py::test_other_directions_unrolled_loops_and_concatenation_earn_full_marks",
    "test_collectives.py::test_solution_full_marks_as_module_and_notebook",
    "test_collectives.py::test_unusual_but_right_designs_earn_full_marks[axis_size_by_psum_of_one]",
    "test_collectives.py::test_unusual_but_right_designs_earn_full_marks[honest_fori_unroll_and_pshuffle]",
    "test_collectives.py::test_unusual_but_right_designs_earn_full_marks[ring_in_while_loop]",
    "test_collectives.py::test_unusual_but_right_designs_earn_full_marks[ring_over_both_axes]",
    "test_graders_problem1.py::test_a_shard_map_manual_over_x_only_is_a_shard_map_on_every_mesh",
    "test_graders_problem1.py::test_each_corpus_file_scores_its_verdict[shard_map_over_x_only]",
    "test_graders_problem1.py::test_solution_gets_full_marks[module]",
    "test_graders_problem1.py::test_solution_gets_full_marks[notebook]",
    "test_problem2.py::test_experts_kept_on_their_rows_another_way_earn_full_marks[experts_transposed_in_place]",
    "test_problem2.py::test_experts_kept_on_their_rows_another_way_earn_full_marks[nested_shard_maps]",
    "test_problem2.py::test_experts_kept_on_their_rows_another_way_earn_full_marks[onehot_dispatch]",
    "test_problem2.py::test_experts_kept_on_their_rows_another_way_earn_full_marks[packed_ids_fori_loop]",
    "test_problem2.py::test_gshard_routing_bookkeeping_earns_full_marks",
    "test_problem2.py::test_solution_gets_full_marks_on_every_mesh",
    "test_problem3.py::test_a_sum_sent_in_its_own_step_of_a_rolled_loop_earns_full_marks",
    "test_problem3.py::test_any_direction_and_unrolled_loops_earn_full_marks",
    "test_problem3.py::test_block_products_fused_with_the_running_sum_earn_full_marks",
    "test_problem3.py::test_solution_full_marks_as_module_and_notebook",
    "test_problem4.py::test_a_module_of_the_answer_cells_grades_as_the_notebook",
    "test_problem4.py::test_solutions_full_marks_including_odd_rings",
    "test_problem4.py::test_unrolled_rings_written_one_after_the_other_earn_full_marks",
    "test_training.py::test_gathering_again_for_the_backward_pass_earns_full_marks",
    "test_training.py::test_honest_backward_passes_earn_full_marks[add_then_send]",
    "test_training.py::test_honest_backward_passes_earn_full_marks[gather_a_for_dw]",
    "test_training.py::test_honest_backward_passes_earn_full_marks[unrolled_forward_rings]",
    "test_training.py::test_honest_backward_passes_earn_full_marks[vjp_of_the_ring]",
    "test_training.py::test_honest_variety_earns_full_marks[losses_inside_shard_map]",
    "test_training.py::test_honest_variety_earns_full_marks[overlap_elsewhere]",
    "test_training.py::test_honest_variety_earns_full_marks[spelled_by_hand]",
    "test_training.py::test_honest_variety_earns_full_marks[unchecked_vma]",
    "test_training.py::test_honest_variety_earns_full_marks[unrolled_ring_hides_da_products]",
    "test_training.py::test_honest_variety_earns_full_marks[vjp_inside_shard_map]",
    "test_training.py::test_solution_full_marks_as_module_and_notebook",
    "test_warmup.py::test_solution_gets_full_marks_on_every_mesh[module]",
    "test_warmup.py::test_solution_gets_full_marks_on_every_mesh[notebook]",
)
"""The corpus tests of designs that must earn full marks (node ids under tests/): on both stacks."""


def on_the_older_stack() -> dict[str, set[str]]:
    """node id -> the rule ids its gradings must find (none for an honest design)."""
    tests: dict[str, set[str]] = {node: set() for node in HONEST_DESIGNS}
    for samples in RULE_SAMPLES.values():
        for rule, node in samples.items():
            tests.setdefault(node, set()).add(rule)
    return tests
