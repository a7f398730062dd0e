"""The locked set-up cells of each assignment's notebook, as released (generated from source/
by `python -m graders.build`; do not edit). Every route grades a notebook with these in place
of the student's copies, as nbgrader's autograde restores locked cells: a set-up cell the
student changed never changes the grade."""

SETUP_CELLS: dict[str, dict[str, str]] = {
    'collectives': {
        'setup': '# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen\n# before anything else touches JAX (if it complains, restart the kernel and run it first).\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, compare, make_mesh, report, show_mesh, show_sharding',
    },
    'problem1': {
        'setup': '# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen\n# before anything else touches JAX (if it complains, restart the kernel and run it first).\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, make_mesh, report, show_mesh, show_sharding',
    },
    'problem2': {
        'setup': '# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen\n# before anything else touches JAX (if it complains, restart the kernel and run it first).\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport dataclasses\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, make_mesh, report, show_mesh, show_sharding',
    },
    'problem3': {
        'setup': '# Run this cell first: 8 simulated CPU devices, before anything else touches JAX.\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, compare, make_mesh, report, show_sharding',
    },
    'problem4': {
        'setup': '# Run this cell first: 8 simulated CPU devices, before anything else touches JAX.\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, compare, make_mesh, report',
    },
    'training': {
        'setup': '# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen\n# before anything else touches JAX (if it complains, restart the kernel and run it first).\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, compare, make_mesh, report, show_mesh, show_sharding',
    },
    'warmup': {
        'setup': "# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen\n# before anything else touches JAX (if it complains, restart the kernel and run it first).\nimport assignments\nassignments.setup_devices(8, announce=True)\n\nimport functools\n\nimport jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nfrom assignments import check, make_mesh, report, show_mesh, show_sharding\n\nALL = ('X', 'Y')   # both mesh axes at once: P(ALL) splits a dimension over every device",
    },
}
