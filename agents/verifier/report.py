"""Placeholder report models until the verifier lands (replaced wholesale then)."""

from typing import Literal

from bus.messages import Message


class Failure(Message):
    failure_class: str
    test_id: str | None = None
    path: str | None = None
    line: int | None = None
    message: str
    stack_summary: str | None = None


class Check(Message):
    name: str
    ok: bool
    summary: str = ""


class Baseline(Message):
    failing: list[str] = []


class VerificationReport(Message):
    kind: Literal["verification_report"] = "verification_report"
    verdict: Literal["passed", "failed", "unverified"]
    checks: list[Check] = []
    failures: list[Failure] = []
