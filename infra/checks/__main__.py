"""`python -m infra.checks` from the repository root: every offline check of `infra/` (the
Containerfile, and every kustomization under infra/k8s rendered, validated and its `codeloop`
command lines parsed), one line per problem, exit status 1 when there is any. No cluster, no
container engine, no network: for CI or a pre-commit hook."""

import subprocess
import sys
from pathlib import Path

from infra.checks import containerfile, manifests


def main() -> int:
    root = Path.cwd()
    if not (root / containerfile.CONTAINERFILE).is_file() or not (root / manifests.K8S_ROOT).is_dir():
        print(
            f"error: run from the repository root ({containerfile.CONTAINERFILE} and {manifests.K8S_ROOT}/ not found here)",
            file=sys.stderr,
        )
        return 2
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True)
    problems = [
        f"{containerfile.CONTAINERFILE}: {p}" for p in containerfile.check(root, tracked.stdout.splitlines())
    ]
    problems += manifests.check_tree(manifests.K8S_ROOT)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s)" if problems else "infra checks: no problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
