"""The small subset of kustomize that `infra/k8s/` uses, so an overlay is checked as it renders.

Supported, as kustomize does them: `resources` (files and directories with a kustomization),
`namespace` (namespaced kinds only), `labels` (metadata labels only: `includeSelectors` and
`includeTemplates` false), `images` (name, newName, newTag, digest; every container and init
container) and `patches` (by `path` or inline `patch`, with or without `target`; a mapping is a
strategic merge patch, a list a JSON 6902 patch). A strategic merge here merges the lists
Kubernetes merges by key (containers, volumes, env ... by name; ports by containerPort; volume
mounts by mountPath) and replaces every other list, as the API's own merge keys say; `$patch`
directives are not supported. Any other kustomization field is an error, not silently ignored,
so the renderer never claims to check what it does not apply.
"""

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION = "kustomization.yaml"
SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "patches"}
CLUSTER_SCOPED = {
    "Namespace",
    "RuntimeClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
}
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
}


class KustomizeError(Exception):
    """A kustomization this renderer cannot apply: a missing file, an unsupported field, a bad patch."""


@dataclass
class Resource:
    """One rendered document and the file it came from (patches change it in place)."""

    doc: dict[str, Any]
    source: Path
    patched_by: list[Path] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.doc.get("metadata", {}).get("name", ""))

    def where(self) -> str:
        return f"{self.source}: {self.kind}/{self.name}"


def load_documents(path: Path) -> list[Resource]:
    """The non-empty YAML documents of one file."""
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError as exc:
        raise KustomizeError(f"{path}: not YAML: {exc}") from None
    resources = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise KustomizeError(f"{path}: a document is not a mapping")
        resources.append(Resource(doc, path))
    return resources


def build(directory: Path) -> list[Resource]:
    """What `kustomize build DIRECTORY` would print, for the supported subset."""
    kfile = directory / KUSTOMIZATION
    if not kfile.is_file():
        raise KustomizeError(f"{directory}: no {KUSTOMIZATION}")
    spec = yaml.safe_load(kfile.read_text()) or {}
    unsupported = sorted(set(spec) - SUPPORTED)
    if unsupported:
        raise KustomizeError(f"{kfile}: fields this renderer does not apply: {', '.join(unsupported)}")
    resources: list[Resource] = []
    for entry in spec.get("resources", []):
        path = Path(os.path.normpath(directory / entry))  # relative stays relative, for messages
        if path.is_dir():
            resources += build(path)
        elif path.is_file():
            resources += load_documents(path)
        else:
            raise KustomizeError(f"{kfile}: resource {entry} does not exist")
    for entry in spec.get("patches", []):
        _apply_patch(entry, directory, kfile, resources)
    if "namespace" in spec:
        for resource in resources:
            if resource.kind not in CLUSTER_SCOPED:
                resource.doc.setdefault("metadata", {})["namespace"] = spec["namespace"]
    for entry in spec.get("labels", []):
        if entry.get("includeSelectors") or entry.get("includeTemplates"):
            raise KustomizeError(f"{kfile}: labels with includeSelectors/includeTemplates are not supported")
        for resource in resources:
            resource.doc.setdefault("metadata", {}).setdefault("labels", {}).update(entry.get("pairs", {}))
    for entry in spec.get("images", []):
        for resource in resources:
            _set_images(resource.doc, entry)
    return resources


def _apply_patch(entry: dict[str, Any], directory: Path, kfile: Path, resources: list[Resource]) -> None:
    if "path" in entry:
        origin = directory / entry["path"]
        if not origin.is_file():
            raise KustomizeError(f"{kfile}: patch {entry['path']} does not exist")
        text = origin.read_text()
    elif "patch" in entry:
        origin, text = kfile, entry["patch"]
    else:
        raise KustomizeError(f"{kfile}: a patch needs path or patch")
    body = yaml.safe_load(text)
    target = entry.get("target")
    if isinstance(body, list):
        if not target:
            raise KustomizeError(f"{origin}: a JSON 6902 patch needs a target")
    elif isinstance(body, dict):
        target = target or {"kind": body.get("kind"), "name": body.get("metadata", {}).get("name")}
    else:
        raise KustomizeError(f"{origin}: a patch is a mapping (strategic merge) or a list (JSON 6902)")
    unknown = sorted(set(target) - {"kind", "name", "namespace"})
    if unknown:
        raise KustomizeError(f"{origin}: target fields this renderer does not match on: {', '.join(unknown)}")
    matched = [r for r in resources if _matches(r, target)]
    if not matched:
        raise KustomizeError(f"{origin}: the patch's target {target} matches no resource")
    for resource in matched:
        try:
            if isinstance(body, list):
                resource.doc = json_patch(resource.doc, body)
            else:
                patch = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
                patch.get("metadata", {}).pop("name", None)
                resource.doc = strategic_merge(resource.doc, patch)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise KustomizeError(f"{origin}: cannot patch {resource.where()}: {exc}") from None
        resource.patched_by.append(origin)


def _matches(resource: Resource, target: dict[str, object]) -> bool:
    for key, value in target.items():
        actual = resource.kind if key == "kind" else resource.doc.get("metadata", {}).get(key, "")
        if value is not None and not re.fullmatch(str(value), str(actual)):
            return False
    return True


def strategic_merge(base: object, patch: object) -> Any:
    """`patch` merged into `base` (neither changed): mappings recursively, a null deletes a key,
    lists with a Kubernetes merge key merged item by item, other lists replaced."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(key, str) and key.startswith("$"):
            raise ValueError(f"directive {key} is not supported")
        if value is None:
            merged.pop(key, None)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = _merge_list(merged[key], value, MERGE_KEYS[key])
        else:
            merged[key] = strategic_merge(merged.get(key), value)
    return merged


def _merge_list(base: list[object], patch: list[object], key: str) -> list[object]:
    merged = copy.deepcopy(base)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise ValueError(f"an item of a list merged by {key} has no {key}")
        for n, existing in enumerate(merged):
            if isinstance(existing, dict) and existing.get(key) == item[key]:
                merged[n] = strategic_merge(existing, item)
                break
        else:
            merged.append(copy.deepcopy(item))
    return merged


def json_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 add, remove and replace on a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for op in operations:
        kind = op.get("op")
        if kind not in ("add", "remove", "replace"):
            raise ValueError(f"JSON patch op {kind!r} is not supported (add, remove, replace)")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            else:
                parent[index] = copy.deepcopy(op["value"])
        else:
            if kind in ("remove", "replace") and last not in parent:
                raise KeyError(f"{op['path']} does not exist")
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = copy.deepcopy(op["value"])
    return doc


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """name, tag, digest of an image reference (a registry port is not a tag)."""
    name, _, digest = image.partition("@")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def _set_images(node: object, entry: dict[str, object]) -> None:
    if isinstance(node, list):
        for item in node:
            _set_images(item, entry)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("containers", "initContainers") and isinstance(value, list):
            for container in value:
                if isinstance(container, dict) and isinstance(container.get("image"), str):
                    container["image"] = _new_image(container["image"], entry)
        _set_images(value, entry)


def _new_image(image: str, entry: dict[str, Any]) -> str:
    name, tag, digest = split_image(image)
    if name != entry["name"]:
        return image
    name = entry.get("newName", name)
    if "digest" in entry:
        return f"{name}@{entry['digest']}"
    tag = entry.get("newTag", tag)
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest and "newTag" not in entry else "")
