"""`codeloop swebench`: SWE-bench instances run and graded in the gVisor sandbox, without Docker.

The official specs, log parsers and grading (`official`, `specs`, `grade`), the instances and
predictions read in (`instances`, `predictions`), the repositories and their environments
(`repositories`, `recipe`, `layer`, `trees`), one instance's run (`run`, `harness`, `script`),
solving with a model first (`solve`), the work spread over workers on the bus (`coordinator`,
`worker`, `distribution`) and the report (`report`, `html`, `outcome`). The command is
`codeloop/cli/swebench.py`; `docs/swebench.md` describes it.
"""

SWEBENCH_ROLE = "swebench"
"""What `codeloop serve --role` calls a SWE-bench worker slot (`worker.SwebenchWorkers`, a service
of the serve); here, so the command line checks its roles without importing the worker."""
