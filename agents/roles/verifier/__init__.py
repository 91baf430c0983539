"""The verifier: judges a patch against the tree its task started from, with structured failures.

No model decides here; everything is a check a person could repeat. Entry points (what the
verifier's role, `role.py`, calls; `verify.py` holds them):

    report, baseline = await verify_patch(
        workspace=scratch,          # git repository whose HEAD commit is the task's starting tree,
                                    # working tree clean; back at that tree when this returns
        patch=diff,                 # unified diff, a/ b/ prefixes, as `git diff` writes it
        task=PatchTask(             # what the task says about the patch
            mode="execute",         # the task's mode: any change in read mode is out of scope
            plan_files=plan.files_of_interest,
            test_targets=plan.test_targets,   # pytest node ids or files
        ),
        tools=provider,             # ToolProvider; its `exec` server is opened once, for every call
        deadline=task_deadline,     # aware datetime; every run gets the time left as its timeout
        baseline=record.baseline,   # None on the first verification; keep the returned one
    )
    report = await verify_answer(workspace=scratch, answer=text)
    feedback = revision_feedback(report)   # agents.feedback, for the coder: failing test ids first

`verify_patch` steps, one module each: read the patch (`patchset`: `patch.malformed`,
`patch.empty`), review the diff (`diff_review`, `secrets`), `git apply` it (`tree`:
`patch.apply_failed`), static checks of the changed files (`static`: only findings the patch
introduced), the coverage run of the suite on the starting tree (`changed_code` says which
starting lines the patch changes, `measure` runs it, `execution` says which tests execute them and
keeps the run per tree), the targeted tests with the patch — those that execute the changed code,
the ones named, the ones the patch edits (`selection`) — and the comparison with the starting tree
(`testing`; `baseline` keeps what is learnt). Tests that execute none of the changed code cannot
change outcome, so the rest of the suite runs again only when a changed line runs at import or a
file coverage cannot follow changed (docs/verification.md says what is exact and what is
conservative). Without coverage (the test interpreter cannot run it, or the project's test
command is not pytest) the earlier design applies: targets by name and traceback, then the whole
suite. When a targeted test fails because of the patch it returns at once: the coder hears of it
after one short run. All calls go through one exec session (`exec_session`), so one sandbox serves
the whole verification.
Options: `limits=ReviewLimits(...)` (size caps), `full_suite=False` (targeted tests only).

In execute mode the task's own example (code blocks, `>>>` sessions in its text: `example`) runs on
the starting tree and with the patch, in the sandbox, as a reproduction.

`report.verdict` is `passed` only when something shows the problem fixed (`report.evidence_kind`:
a target test's flip confirmed in the company it passes in, a test the patch adds failing without
its fix, or the task's example no longer failing), `failed` (the failures say why) or `unverified`
(nothing wrong found but nothing shown fixed, or nothing could judge the patch); `VerificationReport.model_dump(mode="json")` is a
superset of the result object's `verification` (the report models are wire models:
`agents.messages.verification`). `Baseline` is small enough to keep on the task
record and makes later revisions cheaper. The failure classes are those of `agents.failures`.

Nothing is imported here: the rest pulls in the MCP client, which costs seconds of import time a
process that does not verify should not pay (the orchestrator imports nothing of the verifier:
the report's wording for the coder is `agents.feedback`).
"""
