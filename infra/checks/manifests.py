"""The Kubernetes manifests checked offline: schemas, the KEDA resources, and CLI drift.

Every document of every kustomization under `infra/k8s/` (the base, and each overlay as
`kustomize.build` renders it) is validated with `kubernetes-validate` against the Kubernetes
JSON schemas it bundles, strictly (an unknown field is an error, so a misspelt key does not pass
as an ignored one), for the oldest and the newest Kubernetes version we claim. KEDA's
`ScaledObject` is a custom resource those schemas do not know: it is checked against
`SCALED_OBJECT_SCHEMA`, which covers the fields we use and the `nats-jetstream` trigger's
metadata. Every container whose command line runs `codeloop` must parse in the CLI
(`cli_drift.command_problems`). A YAML file under `infra/k8s/` that no kustomization uses is
reported too: it would be checked by nothing and applied by no one.
"""

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
from pydantic import JsonValue

from infra.checks.cli_drift import command_problems, shell_invocations
from infra.checks.kustomize import KUSTOMIZATION, KustomizeError, Resource, build, load_documents, split_image

K8S_ROOT = Path("infra/k8s")
KUBERNETES_VERSIONS = ("1.30", "1.37")
"""The oldest Kubernetes we claim the manifests for, and the newest the bundled schemas know."""
CODELOOP_IMAGE = "codeloop"
"""The image name the manifests use for infra/container/Containerfile's image (its entry point
is `codeloop`, so a container with only `args` runs `codeloop ARGS`); overlays rename it."""

_STRING: JsonValue = {"type": "string"}
_INT_STRING: JsonValue = {"type": "string", "pattern": "^[0-9]+$"}
_BOOL_STRING: JsonValue = {"type": "string", "enum": ["true", "false"]}
SCALED_OBJECT_SCHEMA: dict[str, JsonValue] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "KEDA ScaledObject (keda.sh/v1alpha1), the fields codeloop's manifests use",
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                "namespace": _STRING,
                "labels": {"type": "object", "additionalProperties": _STRING},
                "annotations": {"type": "object", "additionalProperties": _STRING},
            },
        },
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": _STRING,
                        "apiVersion": _STRING,
                        "kind": _STRING,
                        "envSourceContainerName": _STRING,
                    },
                },
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "initialCooldownPeriod": {"type": "integer", "minimum": 0},
                "idleReplicaCount": {"type": "integer", "minimum": 0},
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "fallback": {
                    "type": "object",
                    "required": ["failureThreshold", "replicas"],
                    "additionalProperties": False,
                    "properties": {
                        "failureThreshold": {"type": "integer", "minimum": 1},
                        "replicas": {"type": "integer", "minimum": 0},
                    },
                },
                "advanced": {"type": "object"},
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "additionalProperties": False,
                        "properties": {
                            "type": _STRING,
                            "name": _STRING,
                            "metadata": {"type": "object", "additionalProperties": _STRING},
                            "authenticationRef": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {"name": _STRING, "kind": _STRING},
                            },
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                            "useCachedMetrics": {"type": "boolean"},
                        },
                        "if": {"properties": {"type": {"const": "nats-jetstream"}}},
                        "then": {
                            "properties": {
                                "metadata": {
                                    "required": [
                                        "natsServerMonitoringEndpoint",
                                        "account",
                                        "stream",
                                        "consumer",
                                    ],
                                    "additionalProperties": False,
                                    "properties": {
                                        "natsServerMonitoringEndpoint": {
                                            "type": "string",
                                            "pattern": "^[^/:]+:[0-9]+$",
                                        },
                                        "account": _STRING,
                                        "stream": _STRING,
                                        "consumer": _STRING,
                                        "lagThreshold": _INT_STRING,
                                        "activationLagThreshold": _INT_STRING,
                                        "useHttps": _BOOL_STRING,
                                    },
                                }
                            }
                        },
                    },
                },
            },
        },
    },
}


def schema_problems(resource: Resource, versions: tuple[str, ...] = KUBERNETES_VERSIONS) -> list[str]:
    """The document against its schema: KEDA's ScaledObject here, every other kind Kubernetes'."""
    doc = resource.doc
    if doc.get("apiVersion", "").startswith("keda.sh/"):
        if doc.get("kind") != "ScaledObject":
            return [f"{resource.where()}: no schema here for KEDA's {doc.get('kind')}"]
        validator = jsonschema.Draft202012Validator(SCALED_OBJECT_SCHEMA)
        problems = [
            f"{resource.where()}: {error.message} at /{'/'.join(map(str, error.absolute_path))} (KEDA schema)"
            for error in validator.iter_errors(doc)
        ]
        spec = doc.get("spec", {})
        if spec.get("minReplicaCount", 0) > spec.get("maxReplicaCount", 100):
            problems.append(f"{resource.where()}: minReplicaCount is above maxReplicaCount")
        return problems
    if "apiVersion" not in doc or "kind" not in doc:
        return [f"{resource.where()}: a document without apiVersion or kind"]
    problems = []
    for version in versions:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            at = "/".join(map(str, exc.absolute_path))
            problems.append(f"{resource.where()}: {exc.message} at /{at} (Kubernetes {version})")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{resource.where()}: {exc.message}")
    return problems


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec a workload runs (Pod, Deployment, StatefulSet, DaemonSet, Job, CronJob)."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    return (template or {}).get("spec") if isinstance(template, dict) else None


def containers(doc: dict[str, object]) -> list[dict[str, Any]]:
    spec = pod_spec(doc) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def codeloop_command_lines(container: dict[str, Any]) -> list[list[str]]:
    """The `codeloop` argument lists a container runs: after `codeloop` in its command, inside an
    `sh -c` script, or its args alone when it runs the codeloop image's entry point."""
    command = [str(w) for w in container.get("command") or []]
    args = [str(w) for w in container.get("args") or []]
    if not command:
        name = split_image(str(container.get("image", "")))[0].rsplit("/", 1)[-1]
        return [args] if name == CODELOOP_IMAGE and args else []
    words = command + args
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] == "-c":
        return shell_invocations(words[2])
    for n, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "codeloop":
            return [words[n + 1 :]]
    return []


def drift_problems(resource: Resource) -> list[str]:
    """Each `codeloop` command line of the resource's containers against the CLI."""
    problems = []
    for container in containers(resource.doc):
        for argv in codeloop_command_lines(container):
            for problem in command_problems(argv):
                problems.append(f"{resource.where()} container {container.get('name')}: {problem}")
    return problems


def resource_problems(resources: list[Resource]) -> list[str]:
    problems = []
    for resource in resources:
        problems += schema_problems(resource)
        problems += drift_problems(resource)
    return problems


def load(path: Path) -> list[Resource]:
    """A kustomization directory rendered, a plain directory's YAML files, or one file."""
    if path.is_dir() and (path / KUSTOMIZATION).is_file():
        return build(path)
    if path.is_dir():
        return [r for file in sorted(path.rglob("*.y*ml")) for r in load_documents(file)]
    return load_documents(path)


def check(path: Path) -> list[str]:
    """Every problem of the manifests at `path` (see `load`)."""
    try:
        return resource_problems(load(path))
    except KustomizeError as exc:
        return [str(exc)]


def check_tree(root: Path) -> list[str]:
    """Every kustomization under `root` rendered and checked, and YAML files none of them uses."""
    problems: list[str] = []
    used: set[Path] = set()
    for kfile in sorted(root.rglob(KUSTOMIZATION)):
        problems += check(kfile.parent)
        used |= _files_used(kfile)
    for path in sorted(root.rglob("*.y*ml")):
        if path.name != KUSTOMIZATION and path.resolve() not in used:
            problems.append(f"{path}: no kustomization uses this file")
    return list(dict.fromkeys(problems))  # a base's problem shows once, not once per overlay


def _files_used(kfile: Path) -> set[Path]:
    import yaml

    spec = yaml.safe_load(kfile.read_text()) or {}
    listed = [*spec.get("resources", []), *(p["path"] for p in spec.get("patches", []) if "path" in p)]
    return {(kfile.parent / entry).resolve() for entry in listed}
