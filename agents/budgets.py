"""How a budget that ended a task is told: which budget, its value, how much was used, and the flag
or configuration key that raises it, in codeloop's words.

A model library's own message ("The next request would exceed the request_limit of 11") speaks of
the limit of one run, which is what the task had left, not the budget the user set: a task with
`max_steps = 30` stopped by a `request_limit` of 11 must say 30, and `--max-steps`.
"""

import datetime as dt
from dataclasses import dataclass

from agents.messages import Budgets, QuotaAllowance, Usage


@dataclass(frozen=True)
class BudgetWords:
    """What a person needs to know about one budget."""

    name: str
    """`the step budget`."""
    key: str
    """Its key under `[budgets]` in codeloop.toml (and its field of `Budgets`)."""
    unit: str
    """What it counts."""
    flag: str
    """The `run`/`submit` option that sets it for one task."""


WORDS = {
    "budget.steps": BudgetWords("the step budget", "max_steps", "model requests, all roles", "--max-steps"),
    "budget.tokens": BudgetWords(
        "the token budget", "max_tokens", "tokens, input and output, all roles", "--token-budget"
    ),
    "budget.cost": BudgetWords("the cost budget", "max_cost_usd", "US dollars of model use", "--cost-budget"),
    "budget.wall": BudgetWords("the deadline", "deadline_s", "seconds from submission", "--timeout"),
    "budget.revisions": BudgetWords(
        "the revision budget", "max_revisions", "revisions after failed verification", "--max-revisions"
    ),
}


def budget_used_up(
    failure_class: str, budgets: Budgets, *, used: float | None = None, during: str = ""
) -> str:
    """`The step budget is used up: 30 of 30 model requests, all roles (max_steps). Raise it with
    --max-steps N, or max_steps under [budgets] in codeloop.toml.` `used`: how much the task
    used, when known; `during`: what was going on (`while coding`)."""
    words = WORDS.get(failure_class)
    if words is None:
        return f"A limit ended the task ({failure_class})."
    limit = getattr(budgets, words.key)
    spent = f"{_number(used)} of " if used is not None else ""
    what = "passed" if failure_class == "budget.wall" else "used up"
    return (
        f"{words.name[0].upper()}{words.name[1:]} {'' if what == 'passed' else 'is '}{what}"
        f"{' ' + during if during else ''}: {spent}{_number(limit)} {words.unit} ({words.key}). "
        f"Raise it with {words.flag} N, or {words.key} under [budgets] in codeloop.toml."
    )


def _number(value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:,.2f}" if isinstance(value, float) and not value.is_integer() else f"{int(value):,}"


def quota_used_up(quota: QuotaAllowance, usage: Usage) -> str:
    """`The daily quota of principal 'alice' is used up: 1,050 of 1,000 tokens today, all its
    tasks (quotas.alice.tokens_per_day; this task used 300). It resets at ...; an operator raises
    it in the configuration center.`"""
    if quota.tokens_per_day is not None and quota.others_tokens + usage.tokens >= quota.tokens_per_day:
        name, used, limit, unit = (
            "tokens_per_day",
            quota.others_tokens + usage.tokens,
            quota.tokens_per_day,
            "tokens",
        )
        own = f"{usage.tokens:,}"
    else:
        name, used, limit, unit = (
            "cost_per_day_usd",
            quota.others_cost_usd + (usage.cost_usd or 0.0),
            quota.cost_per_day_usd,
            "US dollars",
        )
        own = _number(usage.cost_usd or 0.0)
    resets = dt.datetime.combine(dt.date.fromisoformat(quota.day) + dt.timedelta(days=1), dt.time(), dt.UTC)
    return (
        f"The daily quota of principal {quota.principal!r} is used up: {_number(used)} of {_number(limit)} "
        f"{unit} on {quota.day} (UTC), all its tasks ({quota.key}.{name}; this task used {own}). "
        f"It resets at {resets.strftime('%Y-%m-%dT%H:%M:%SZ')}; an operator raises it with "
        f"{quota.key}.{name} in the configuration center (codeloop config push)."
    )
