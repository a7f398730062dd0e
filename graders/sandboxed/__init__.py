"""What runs inside the graders' sandbox, and nothing else of the graders.

- `export`: the export worker: runs a submission and exports each graded function;
- `judge`: compiles, inspects, runs and compares the exported programs;
- `multicontroller`: one process of a multi-controller JAX runtime (`graders.distributed`);
- `protocol`: what these workers and the trusted grading process say to each other.

The sandbox mounts this folder and the `assignments` runtime alone, read-only; these modules
import nothing else of `graders` (a test checks it).
"""
