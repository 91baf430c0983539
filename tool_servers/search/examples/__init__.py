"""Running the code an issue shows, to see which files it executes.

A bug report often carries its reproduction: a doctest session, an IPython transcript, a script in
a fenced block. Run in the repository, that code executes the files the bug lives in, including
the ones it reaches only indirectly (the domain class behind `apart`, the printer behind
`lambdify`), which no word of the issue names. `extract` takes the runnable statements out of the
text (prompts stripped, printed output and tracebacks dropped), `tracer` is the script that runs
them under a profiler and reports, per repository file, how many distinct functions ran, and
`run` runs it in the sandbox on a scratch copy of the indexed files, never on the checkout itself.

It is opt-in (`codeloop search --run-examples`): the statements are whatever the issue's writer
typed, so they run only when asked, and only in the sandbox (gVisor where available, else the
weaker process backend, which the result says).
"""
