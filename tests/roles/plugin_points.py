"""Entry points as an installed plug-in package would declare them, pointing at `sample_roles`."""

from importlib.metadata import EntryPoint, entry_points

from agents.runtime.plugins import RoleRegistry, load_roles

GROUP = "codeloop.roles"
SAMPLES = "tests.roles.sample_roles"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


GOOD = [
    point("sample-coder", f"{SAMPLES}:SAMPLE_CODER"),
    point("malformed-reviewer", f"{SAMPLES}:MALFORMED_REVIEWER"),
    point("raising-reviewer", f"{SAMPLES}:RAISING_REVIEWER"),
    point("approver", f"{SAMPLES}:APPROVER"),
]
BROKEN = [
    point("import-fails", "tests.roles.raises_on_import:ROLE"),
    point("wrong-signature", f"{SAMPLES}:wrong_signature"),
    point("not-a-role", f"{SAMPLES}:NOT_A_ROLE"),
    point("misnamed", f"{SAMPLES}:MISNAMED"),
    point("verifier", f"{SAMPLES}:APPROVER"),  # takes a built-in's name
]


def with_samples() -> RoleRegistry:
    """The installed roles (the built-ins at least) plus the samples, good and broken."""
    return load_roles([*entry_points(group=GROUP), *GOOD, *BROKEN])
