"""Offline checks of what `infra/` ships: the container image's build file and the Kubernetes manifests.

Nothing here needs a cluster, a container engine or the network: the manifests are validated against
the Kubernetes JSON schemas `kubernetes-validate` bundles, and every `codeloop` command line in them
(and in the Containerfile) is parsed by the CLI's own click commands, so a renamed or misspelt flag
fails here instead of in a pod. `python -m infra.checks` runs them all; `tests/infra/` asserts them.
"""
