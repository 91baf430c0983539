"""Gold-derived predictions for checking the grading: the gold patch with one hunk left out.

A variant applies (its hunks are the gold patch's own) but changes less than the fix, so the
official grading must tell it from gold by the per-test outcomes of the same log parser. Used by
`benchmarks/swebench_variants.py` and the grading tests.
"""

from unidiff.patch import PatchSet

from codeloop.swebench.instances import Instance


def without_hunk(patch: str, which: int) -> str | None:
    """`patch` with hunk number `which` (0-based over the whole patch; negative from the end)
    left out; None when the patch has a single hunk (leaving it out leaves no change)."""
    patchset = PatchSet(patch)
    hunks = [(f, h) for f in patchset for h in f]
    if len(hunks) < 2:
        return None
    drop = hunks[which]
    parts = []
    for patched in patchset:
        kept = [h for h in patched if (patched, h) != drop]
        if not kept:
            continue
        header = str(patched).split("\n@@", 1)[0].rstrip("\n")
        parts.append(header + "\n" + "".join(str(h) for h in kept))
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def gold_variants(instance: Instance) -> dict[str, str]:
    """Up to two variants: `last-hunk-out` and `first-hunk-out` (one for a two-hunk patch
    would repeat nothing: both are kept when they differ)."""
    found: dict[str, str] = {}
    for name, which in (("last-hunk-out", -1), ("first-hunk-out", 0)):
        variant = without_hunk(instance.patch, which)
        if variant is not None and variant not in found.values():
            found[name] = variant
    return found
