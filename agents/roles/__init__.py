"""The built-in roles, one module each; each is defined for the runtime in `agents/runtime/builtin.py`.

planner.py    (LLM) a structured plan from the task and a first look at the repository
retriever.py  (no LLM) ranked files, snippets and a repository map within a token budget
context.py    the packer the retriever fills the budget with
coder.py      (LLM) a tool loop over the MCP servers in a scratch workspace; the patch is the
              system's diff
verifier/     (no LLM) the patch judged against the starting tree: review, static checks, tests
echo.py       the bus's test role, and a custom role's whole shape in one module
"""
