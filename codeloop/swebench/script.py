"""The official eval script, adapted to the sandbox.

SWE-bench's own `make_eval_script_list_py` writes the script its container runs; it is taken as
it is, then each line is mapped: the conda activations go (the environment's bin is first on
PATH already), `/testbed` becomes the instance layer's project path (the sandbox shows the tree
there as well as at /workspace: the editable install names that path, and a tool that matches a
module's file against sys.path, as pylint's plugin loader does, must see one path, as in the
container), the base commit becomes the scratch repository's base commit (same tree, another
hash), and the spec's `install` re-run is left out: it ran before the prediction, into the
instance's layer (`codeloop.swebench.layer`), which the sandbox shows read-only, and being
editable it imports the patched tree. Running it after the prediction
would mean running the prediction's setup.py on the host, outside the sandbox: a prediction that
changes packaging metadata (entry points, dependencies) is tested without them. What remains (the informational `git status/show/diff`,
resetting the test files, `git apply -v` of the test patch, the start/end markers around the test
command, and the final reset) runs under `bash -x`, so the log has the shape the official
`get_logs_eval` parses: the same markers, the same trace lines.
"""

from codeloop.swebench.instances import Instance
from codeloop.swebench.official import Spec, swebench

WORKDIR = "/workspace"
_OFFICIAL_WORKDIR = "/testbed"
_DROPPED = ("source /opt/miniconda3/bin/activate", "conda activate testbed")


def eval_script(instance: Instance, spec: Spec, *, base_commit: str, workdir: str = WORKDIR) -> str:
    """The bash script that applies the test patch and runs the spec's test command on the
    test directives, between SWE-bench's output markers."""
    modules = swebench()
    lines = modules.test_spec_python.make_eval_script_list_py(
        instance.as_swebench(), spec, "testbed", _OFFICIAL_WORKDIR, instance.base_commit, instance.test_patch
    )
    install = spec.get("install")
    adapted = []
    for line in lines:
        if line in _DROPPED:
            continue
        if install and line == install:
            adapted.append(
                f": 'codeloop: installed before the prediction into the read-only layer (editable); not re-run: {install}'"
            )
            continue
        adapted.append(line.replace(_OFFICIAL_WORKDIR, workdir).replace(instance.base_commit, base_commit))
    # The official script runs with `set -uxo pipefail` (TestSpec.eval_script); stderr joins stdout
    # so the trace and the output interleave as in the container's log.
    return "\n".join(["#!/bin/bash", "exec 2>&1", "set -uxo pipefail", *adapted]) + "\n"
